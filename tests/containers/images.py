"""Server images for the container tests, built through the SDK from the debootstrap base image and the
host's binaries in build/bin (plus the shared libraries they load, copied from this Debian host, which the
minbase image lacks). Tagged `...:ctr-test` so they never replace the images `xferbench images build` makes;
rebuilt only when the binary changed (its digest is a label of the image)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import docker
import docker.errors

from xferbench.containers import LABEL
from xferbench.containers.base import ensure_base
from xferbench.experiment import ROOT

TEST_IMAGES = {"xferd-go": "localhost/xferbench/xferd-go:ctr-test", "xferd-c": "localhost/xferbench/xferd-c:ctr-test"}
# xferd-c re-executes itself with LD_PRELOAD of one of these (servers/c/src/allocdet.h).
ALLOCATOR_LIBS = (
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
)
DIGEST_LABEL = "io.xferbench.binary-sha256"
# Shared by the base image (libc6): never copied from the host.
IN_BASE = ("libc.so", "ld-linux", "libm.so", "linux-vdso")


def _libs(path: str) -> set[str]:
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    libs = set()
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            lib = parts[1].split()[0]
            if not any(m in lib for m in IN_BASE):
                libs.add(lib)
    return libs


def _context(server: str, binary: Path, ctx: Path) -> None:
    root = ctx / "root"
    files = {str(binary): f"/usr/local/bin/{server}"}
    if server == "xferd-c":
        for lib in {*_libs(str(binary)), *ALLOCATOR_LIBS, *(dep for a in ALLOCATOR_LIBS for dep in _libs(a))}:
            real = Path(lib).resolve()
            files[str(real)] = str(real)
            # Debian's /lib is a symlink to /usr/lib (merged /usr): a root/lib directory would replace it.
            name = "/usr" + lib if lib.startswith("/lib/") else lib
            if Path(name) != real:
                files[name + ".link"] = name  # the soname: a symlink, recreated below
    links = []
    for src, dst in files.items():
        if src.endswith(".link"):
            links.append((Path(src[: -len(".link")]).resolve(), dst))
            continue
        target = root / dst.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    for real, name in links:
        link = root / name.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(real)
    (ctx / "Dockerfile").write_text(
        # No RUN step: a build container meets the same rlimit refusal as any other (no CAP_SYS_RESOURCE),
        # and the SDK's build takes no ulimits. A numeric user needs no /etc/passwd entry.
        f'ARG BASE\nFROM ${{BASE}}\nCOPY root/ /\nUSER 10001:10001\nENTRYPOINT ["/usr/local/bin/{server}"]\n'
    )


def test_image(client: docker.DockerClient, server: str) -> str:
    """The test image of `server`, built now unless one of the current binary exists."""
    binary = ROOT / "build" / "bin" / server
    if not binary.exists():
        raise FileNotFoundError(f"{binary} does not exist; run `make build`")
    # The binary and how the image is laid out: a change to either makes a new image.
    digest = hashlib.sha256(binary.read_bytes() + Path(__file__).read_bytes()).hexdigest()
    tag = TEST_IMAGES[server]
    try:
        if client.images.get(tag).labels.get(DIGEST_LABEL) == digest:
            return tag
    except docker.errors.ImageNotFound:
        pass
    base = ensure_base(client)
    with tempfile.TemporaryDirectory(prefix="ctr-image-") as tmp:
        _context(server, binary, Path(tmp))
        client.images.build(path=tmp, tag=tag, rm=True, buildargs={"BASE": base},
                            labels={LABEL: "test", DIGEST_LABEL: digest})
    return tag
