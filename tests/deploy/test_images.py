"""xferbench.containers.images: what `ensure` builds, and when it builds again (the inputs hash label).

On the project's engine (engine.ensure(): DOCKER_HOST, else its own Podman service). The first ensure() may
build (a one-time cost, ~7 minutes from scratch here); the second must build nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xferbench.containers import engine, images


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


def test_unknown_image_is_refused() -> None:
    with pytest.raises(images.ImageError, match="no image named nope"):
        images.ensure(None, ["nope"])  # type: ignore[arg-type]  # refused before the engine is asked
