"""The images the stack needs, built through the Docker SDK on whatever engine `engine.ensure()` gives.

`xferbench images build [--base debootstrap|registry]`: xferd-go, xferd-c, locust and prometheus, tagged
`localhost/xferbench/<name>:dev`. No registry and no PyPI are needed inside a build: the servers come from
`build/bin/` (the Dockerfiles' `host` target), Locust's packages from wheels built on this machine
(`pip wheel` into build/wheels/), Prometheus and the allocator libraries from Debian's packages (apt inside
the build). `--base debootstrap` (default) builds on the debootstrap base image (base.ensure_base);
`--base registry` on the Dockerfiles' pinned registry tags.

Each image carries a label with the hash of everything it was built from (Dockerfile, build arguments,
input files): `ensure(client, names)` builds only what is missing or stale, so the runner's container
backend and the compose test can call it every time.

The build context is a tar made here of just the Dockerfile and the image's inputs (not the repository:
docker-py reads only a root .dockerignore, and the checkout holds .venv and build/).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors

from xferbench.config import servers
from xferbench.config.files import ROOT
from xferbench.run.containers import LABEL

DOCKER_DIR = ROOT / "deploy" / "docker"
WHEELS = ROOT / "build" / "wheels"
INPUTS_LABEL = "io.xferbench.inputs"  # sha256 of what the image was built from
BUILD_READ_TIMEOUT_S = 900  # the longest a build step may stay silent (apt-get on a slow mirror)
WHEEL_TIMEOUT_S = 900
SKIP = ("__pycache__", ".pyc", ".mypy_cache", ".pytest_cache", ".ruff_cache")
# What the Locust image runs. xferbench/ is in the project's wheel too, but Locust never imports it: an edit
# there must not cost a Locust rebuild (minutes).
PYTHON_SOURCES = ("pyproject.toml", "py_client", "xfer", "loadgen")

Base = Literal["debootstrap", "registry"]


class ImageError(RuntimeError):
    """An image could not be built; the message names the image and the step."""


def _wheels() -> None:
    """The project and every dependency as wheels in build/wheels/ (PyPI through this machine's pip)."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    for old in WHEELS.glob("xferbench-*.whl"):  # the project's own wheel is always rebuilt
        old.unlink()
    try:
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(WHEELS), str(ROOT)],
                           capture_output=True, text=True, timeout=WHEEL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ImageError(f"locust: `pip wheel` took over {WHEEL_TIMEOUT_S}s") from None
    if p.returncode != 0:
        raise ImageError(f"locust: `pip wheel` failed: {(p.stderr or p.stdout).strip()[-1500:]}")


@dataclass(frozen=True)
class Spec:
    name: str
    sources: tuple[str, ...]  # what the hash covers (paths under the repository root)
    context: tuple[str, ...]  # what goes into the build context
    target: str | None = "host"
    prepare: Callable[[], None] | None = None  # makes context inputs that are derived from the sources
    needs: tuple[str, ...] = field(default=())  # context files that must exist (a hint when they do not)

    @property
    def dockerfile(self) -> str:
        return f"deploy/docker/{self.name}.Dockerfile"


def _server_spec(server: servers.ServerSpec, image: servers.Image) -> Spec:
    """A server's image from its registry entry: the binary is the whole build context."""
    return Spec(image.name, image.sources, (server.binary,), needs=(server.binary,))


SPECS: dict[str, Spec] = {
    **{s.image.name: _server_spec(s, s.image) for s in servers.SERVERS.values() if s.image},
    "locust": Spec("locust", PYTHON_SOURCES, ("loadgen", "build/wheels"), prepare=_wheels),
    "prometheus": Spec("prometheus", ("deploy/prometheus",), ("deploy/prometheus",), target=None),
}
NAMES = tuple(SPECS)


def tag(name: str) -> str:
    return f"localhost/xferbench/{name}:dev"


def _files(rel: str) -> Iterator[Path]:
    p = ROOT / rel
    if p.is_file():
        yield p
        return
    for f in sorted(p.rglob("*")):
        if f.is_file() and not any(s in f.parts or f.name.endswith(s) for s in SKIP):
            yield f


def inputs_hash(spec: Spec, buildargs: dict[str, str]) -> str:
    h = hashlib.sha256()
    h.update((DOCKER_DIR / f"{spec.name}.Dockerfile").read_bytes())
    h.update(json.dumps([spec.target, sorted(buildargs.items())]).encode())
    for rel in spec.sources:
        for f in _files(rel):
            h.update(str(f.relative_to(ROOT)).encode() + b"\0")
            h.update(f.read_bytes())
    return h.hexdigest()


def context_tar(spec: Spec) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(DOCKER_DIR / f"{spec.name}.Dockerfile", arcname=spec.dockerfile)
        for rel in spec.context:
            for f in _files(rel):
                tar.add(f, arcname=str(f.relative_to(ROOT)))
    buf.seek(0)
    return buf


def _current(client: docker.DockerClient, name: str, digest: str) -> bool:
    try:
        img = client.images.get(tag(name))
    except docker.errors.ImageNotFound:
        return False
    return bool((img.labels or {}).get(INPUTS_LABEL) == digest)


def build_one(client: docker.DockerClient, spec: Spec, buildargs: dict[str, str], digest: str,
              nocache: bool = False) -> None:
    for rel in spec.needs:
        if not (ROOT / rel).exists():
            raise ImageError(f"{spec.name}: {rel} is missing: run `make build` first")
    if spec.prepare:
        spec.prepare()
    log = _build(client, spec, buildargs, digest, nocache)
    if not _current(client, spec.name, digest) and not nocache:
        # Podman's layer cache can hand back an earlier image whose layers match but whose label (an older
        # inputs hash) does not, e.g. when sources changed but the binary in the context did not: build again
        # without the cache, so the label always names the inputs.
        log = _build(client, spec, buildargs, digest, nocache=True)
    if not _current(client, spec.name, digest):
        raise ImageError(f"{spec.name}: the build ended without {tag(spec.name)}:\n{''.join(log[-15:]).strip()}")


def _build(client: docker.DockerClient, spec: Spec, buildargs: dict[str, str], digest: str,
           nocache: bool) -> list[str]:
    """One build through the engine's API; the lines it printed."""
    log: list[str] = []
    stream = client.api.build(
        fileobj=context_tar(spec), custom_context=True, dockerfile=spec.dockerfile, tag=tag(spec.name),
        buildargs=buildargs, target=spec.target, labels={LABEL: "image", INPUTS_LABEL: digest},
        rm=True, forcerm=True, pull=False, decode=True, timeout=BUILD_READ_TIMEOUT_S, nocache=nocache,
    )
    for chunk in _chunks(stream):
        if "error" in chunk:
            tail = "".join(log[-15:]).strip()
            raise ImageError(f"{spec.name}: build failed: {str(chunk['error']).strip()}\n{tail}")
        if "stream" in chunk:
            log.append(str(chunk["stream"]))
    return log


def _chunks(stream: Any) -> Iterator[dict[str, Any]]:
    try:
        yield from stream
    except docker.errors.APIError as e:
        raise ImageError(f"the engine refused the build: {e.explanation or e}") from None


def base_tag(client: docker.DockerClient) -> str:
    """The debootstrap base image (made and imported once, base.ensure_base)."""
    from xferbench.run.containers.base import ensure_base

    return ensure_base(client)


def _buildargs(client: docker.DockerClient, base: Base) -> dict[str, str]:
    return {} if base == "registry" else {"BASE": base_tag(client)}  # registry: the Dockerfiles' pinned tags


@dataclass
class Built:
    name: str
    tag: str
    built: bool  # False: it was already current
    seconds: float


def ensure(client: docker.DockerClient, names: Sequence[str] = NAMES, base: Base = "debootstrap",
           on_build: Callable[[Built], None] | None = None, rebuild: bool = False) -> dict[str, str]:
    """Tags of the named images, building those missing or built from other inputs; name -> tag.
    `rebuild`: build every one, without the engine's layer cache (a build from scratch, as in CI)."""
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        raise ImageError(f"no image named {', '.join(unknown)}; known: {', '.join(NAMES)}")
    args = _buildargs(client, base)
    out: dict[str, str] = {}
    for n in names:
        t0 = time.monotonic()
        spec = SPECS[n]
        digest = inputs_hash(spec, args)
        built = rebuild or not _current(client, n, digest)
        if built:
            build_one(client, spec, args, digest, nocache=rebuild)
        out[n] = tag(n)
        if on_build:
            on_build(Built(n, tag(n), built, time.monotonic() - t0))
    return out


# ------------------------------------------------------------------------------------------------ command


def cmd_build(a: argparse.Namespace) -> int:
    from xferbench.run.containers import engine

    def report(b: Built) -> None:
        print(f"{b.tag}: {'built' if b.built else 'up to date'} ({b.seconds:.1f} s)", flush=True)

    t0 = time.monotonic()
    try:
        ensure(engine.ensure(), a.only or NAMES, a.base, report, a.no_cache)
    except (ImageError, engine.EngineError) as e:
        print(f"xferbench images: error: {e}", file=sys.stderr)
        return 1
    print(f"all images ready in {time.monotonic() - t0:.1f} s")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("images", help="build the stack's container images (offline: debootstrap base)",
                       description=(__doc__ or "").split("\n\n")[0])
    isub = p.add_subparsers(dest="images_cmd", required=True, metavar="{build}")
    b = isub.add_parser("build", help="build every image that is missing or stale")
    b.add_argument("--base", choices=("debootstrap", "registry"), default="debootstrap",
                   help="debootstrap: Debian from debootstrap, no registry (default); registry: the pinned tags")
    b.add_argument("--only", action="append", choices=NAMES, metavar="NAME",
                   help=f"just this image (repeatable): {', '.join(NAMES)}")
    b.add_argument("--no-cache", action="store_true",
                   help="rebuild every image without the engine's layer cache (what a fresh CI machine does)")
    b.set_defaults(fn=cmd_build)
