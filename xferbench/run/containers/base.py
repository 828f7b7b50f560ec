"""The base image every xferbench image builds on when no registry is reachable: Debian bookworm from
debootstrap (minbase), tarred once under build/podman/ and imported once into the engine.

Also the ulimits every container needs: without explicit nofile/nproc the OCI runtime raises them to its
defaults, which a sandbox without CAP_SYS_RESOURCE refuses ("error setting rlimit type 7"); so each container
gets this host's own limits, capped.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

import docker
import docker.errors
import docker.types

from xferbench.run.containers import LABEL
from xferbench.run.containers.engine import PODMAN_DIR, EngineError

BASE_TAG = "localhost/xferbench/debian-base:bookworm"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
TARBALL = PODMAN_DIR / f"debian-base-{SUITE}.tar"
DEBOOTSTRAP_TIMEOUT_S = 900
# What a server container asks for, when the host allows that much.
WANT_NOFILE = 20000
WANT_NPROC = 4096


def _capped(limit: int, want: int) -> int:
    # Both soft and hard are set to the host's soft limit at most: lowering is always allowed, raising is not.
    return want if limit == resource.RLIM_INFINITY else min(want, limit)


def ulimits() -> list[docker.types.Ulimit]:
    """nofile and nproc for a container, no higher than this process's own soft limits."""
    nofile = _capped(resource.getrlimit(resource.RLIMIT_NOFILE)[0], WANT_NOFILE)
    nproc = _capped(resource.getrlimit(resource.RLIMIT_NPROC)[0], WANT_NPROC)
    return [
        docker.types.Ulimit(name="nofile", soft=nofile, hard=nofile),
        docker.types.Ulimit(name="nproc", soft=nproc, hard=nproc),
    ]


def ensure_base(client: docker.DockerClient, tag: str = BASE_TAG) -> str:
    """The base image's tag, importing it (and first making its tarball) only when the engine lacks it."""
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    if not TARBALL.exists():
        make_tarball(TARBALL)
    repo, _, version = tag.rpartition(":")
    with open(TARBALL, "rb") as f:
        # Untagged: Podman's compatible import ignores the tag asked for (it writes ":latest"); tagged after.
        answer = client.api.import_image_from_data(f, changes=[f"LABEL {LABEL}=base"])
    image_id = _imported_id(answer)
    if not client.images.get(image_id).tag(repo, version):
        raise EngineError(f"no base image: the engine imported {image_id} but refused the tag {tag}")
    return tag


def _imported_id(answer: str | bytes) -> str:
    """The image id in an import's answer: JSON status lines, the last of which names it."""
    text = answer.decode() if isinstance(answer, bytes) else answer
    for line in reversed(text.splitlines()):
        with contextlib.suppress(ValueError):
            msg = json.loads(line)
            for key in ("id", "status"):
                if str(msg.get(key, "")).startswith("sha256:"):
                    return str(msg[key])
    raise EngineError(f"no base image: the engine's import answer names no image id: {text[:200]!r}")


def why_not_debootstrap() -> str | None:
    if shutil.which("debootstrap") is None:
        return "no base image: debootstrap is not installed (apt-get install debootstrap)"
    if os.geteuid() != 0:
        return f"no base image: debootstrap needs root (uid {os.geteuid()})"
    return None


def make_tarball(out: Path) -> None:
    """debootstrap --variant=minbase into a scratch directory, tarred to `out` (written atomically)."""
    if why := why_not_debootstrap():
        raise EngineError(why)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix="rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        try:
            subprocess.run(
                ["debootstrap", "--variant=minbase", SUITE, str(rootfs), MIRROR],
                check=True, capture_output=True, timeout=DEBOOTSTRAP_TIMEOUT_S,
            )
        except subprocess.CalledProcessError as e:
            last = (e.stdout + e.stderr).decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise EngineError(f"no base image: debootstrap {SUITE} failed: {last[0]}") from e
        except subprocess.TimeoutExpired as e:
            raise EngineError(f"no base image: debootstrap {SUITE} took over {DEBOOTSTRAP_TIMEOUT_S}s") from e
        part = out.with_suffix(".tar.part")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(part), "."], check=True, timeout=DEBOOTSTRAP_TIMEOUT_S)
        part.replace(out)
