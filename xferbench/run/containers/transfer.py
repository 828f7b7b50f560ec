"""An image of this machine's engine sent to another host's engine: `docker save` streamed into `docker load`
through the engine APIs (the other end through its ssh forward, xferbench/run/containers/forward.py), without a
registry and without a copy on disk. Sent only when the other engine lacks the image's id: an image is named by
its id (the digest of its configuration), which a save and a load keep, so the same id there is the same image."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import docker
import docker.errors
import requests.exceptions
from docker.models.images import Image

from xferbench.run.containers import LABEL
from xferbench.run.containers.engine import EngineError


@dataclass(frozen=True)
class Sent:
    """What `ensure` did for one image on one host: `sent` False when the host had it already."""

    tag: str
    image_id: str
    host: str
    sent: bool
    bytes: int = 0
    seconds: float = 0.0


def _split(tag: str) -> tuple[str, str]:
    """ "localhost/xferbench/xferd-c:dev" → ("localhost/xferbench/xferd-c", "dev"); a tag's colon follows the last
    slash (a registry's port comes before it)."""
    repo, sep, version = tag.rpartition(":")
    return (repo, version) if sep and "/" not in version else (tag, "latest")


def _there(client: docker.DockerClient, name: str) -> Image | None:
    try:
        return client.images.get(name)
    except docker.errors.ImageNotFound:
        return None


def ensure(
    local: docker.DockerClient,
    other: docker.DockerClient,
    tag: str,
    host: str,
    on_send: Callable[[Sent], None] | None = None,
) -> Sent:
    """`tag` of the local engine present in `other` (the engine of `host`) under the same id and tag; sent there
    when it has no image of that id. EngineError names the image, the host and what went wrong."""
    try:
        mine = local.images.get(tag)
    except docker.errors.ImageNotFound:
        raise EngineError(
            f"image {tag} is not in this machine's engine, from which it is sent to {host}'s: build or pull it here first"
        ) from None
    image_id = str(mine.id)
    try:
        named = _there(other, tag)
        if named is not None and named.id == image_id:
            return Sent(tag, image_id, host, sent=False)
        same = _there(other, image_id)
        if same is not None:  # there under another name (or none): named as here
            same.tag(*_split(tag))
            return Sent(tag, image_id, host, sent=False)
        return _send(local, other, tag, image_id, host, on_send)
    except (docker.errors.APIError, requests.exceptions.RequestException) as e:
        what = " ".join(str(getattr(e, "explanation", None) or e).split())
        raise EngineError(f"image {tag}: sending it to {host}'s engine failed: {what}") from None


def _send(
    local: docker.DockerClient,
    other: docker.DockerClient,
    tag: str,
    image_id: str,
    host: str,
    on_send: Callable[[Sent], None] | None,
) -> Sent:
    t0 = time.monotonic()
    size = 0

    def chunks() -> Iterator[bytes]:
        nonlocal size
        for chunk in local.api.get_image(tag):  # the archive names the tag: the load tags it too
            size += len(chunk)
            yield chunk

    answer = other.api.load_image(chunks())  # type: ignore[no-untyped-call]  # docker-py's own, unannotated
    said = " ".join(str(m.get("stream") or m.get("error") or "") for m in answer) if answer else ""
    got = _there(other, image_id)
    if got is None:
        raise EngineError(
            f"image {tag}: {host}'s engine loaded {size} bytes but has no image {image_id[:19]}: "
            f"{said.strip() or 'it said nothing'}"
        )
    if tag not in (got.tags or []):
        got.tag(*_split(tag))
    # The image the tag named before (xferbench's own, untagged now) would pile up there at each new build.
    with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
        other.images.prune(filters={"dangling": True, "label": f"{LABEL}=image"})
    done = Sent(tag, image_id, host, sent=True, bytes=size, seconds=time.monotonic() - t0)
    if on_send is not None:
        on_send(done)
    return done
