"""xferbench.run.containers.images: what `ensure` builds, and when it builds again (the inputs hash label).

On the project's engine (engine.ensure(): DOCKER_HOST, else its own Podman service). The first ensure() may
build (a one-time cost, ~7 minutes from scratch here); the second must build nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xferbench.run.containers import engine, images


@pytest.mark.timeout(1800)
def test_ensure_builds_nothing_when_current() -> None:
    client = engine.ensure()
    images.ensure(client)
    seen: list[images.Built] = []
    args = {"BASE": images.base_tag(client)}
    tags = images.ensure(client, on_build=seen.append)
    assert tags == {n: f"localhost/xferbench/{n}:dev" for n in images.NAMES}
    assert [(b.name, b.built) for b in seen] == [(n, False) for n in images.NAMES]
    for n in images.NAMES:
        labels = client.images.get(tags[n]).labels
        assert labels[images.INPUTS_LABEL] == images.inputs_hash(images.SPECS[n], args), n


def test_hash_follows_every_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel in ("deploy/docker/prometheus.Dockerfile", "deploy/prometheus"):
        src, dst = images.ROOT / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy(src, dst)
    monkeypatch.setattr(images, "ROOT", tmp_path)
    monkeypatch.setattr(images, "DOCKER_DIR", tmp_path / "deploy" / "docker")
    spec = images.SPECS["prometheus"]
    first = images.inputs_hash(spec, {"BASE": "a"})
    assert images.inputs_hash(spec, {"BASE": "a"}) == first
    assert images.inputs_hash(spec, {"BASE": "b"}) != first
    rules = tmp_path / "deploy" / "prometheus" / "rules" / "xferbench.yml"
    rules.write_text(rules.read_text() + "\n# edited\n")
    assert images.inputs_hash(spec, {"BASE": "a"}) != first
    (tmp_path / "deploy" / "prometheus" / "rules" / "__pycache__").mkdir()
    (tmp_path / "deploy" / "prometheus" / "rules" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    edited = images.inputs_hash(spec, {"BASE": "a"})
    assert images.inputs_hash(spec, {"BASE": "a"}) == edited


def test_server_hash_follows_sources_not_the_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit that changes no server source must not rebuild the server images: the binaries embed the
    commit (`git describe`, Go's VCS stamp), so the hash reads the sources they are built from."""
    shutil.copytree(images.DOCKER_DIR, tmp_path / "deploy" / "docker")
    main = tmp_path / "servers" / "go" / "cmd" / "xferd-go" / "main.go"
    main.parent.mkdir(parents=True)
    main.write_text("package main\n")
    binary = tmp_path / "build" / "bin" / "xferd-go"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"ELF version f9f5399")
    monkeypatch.setattr(images, "ROOT", tmp_path)
    monkeypatch.setattr(images, "DOCKER_DIR", tmp_path / "deploy" / "docker")
    spec = images.SPECS["xferd-go"]
    first = images.inputs_hash(spec, {})
    binary.write_bytes(b"ELF version 0a1b2c3-dirty")
    assert images.inputs_hash(spec, {}) == first
    main.write_text("package main\n\nfunc init() {}\n")
    assert images.inputs_hash(spec, {}) != first


def test_unknown_image_is_refused() -> None:
    with pytest.raises(images.ImageError, match="no image named nope"):
        images.ensure(None, ["nope"])  # type: ignore[arg-type]  # refused before the engine is asked
