"""The engine is found or refused with one line saying why; every container's ulimits fit the host's."""

from __future__ import annotations

import resource
from pathlib import Path

import docker
import pytest

from xferbench.run.containers import base, engine


def test_docker_host_that_does_not_answer_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    with pytest.raises(engine.EngineError) as ei:
        engine.ensure()
    msg = str(ei.value)
    assert msg.startswith(f"DOCKER_HOST=unix://{tmp_path}/none.sock does not answer: ") and "\n" not in msg


def test_without_podman_the_reason_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no podman, no runc
    why = engine.why_not_podman()
    assert why is not None and "podman is not installed" in why and "\n" not in why
    with pytest.raises(engine.EngineError, match="podman is not installed"):
        engine.start_service()


def test_the_engine_answers_and_runs_a_limited_container(client: docker.DockerClient) -> None:
    """The limits and ulimits every server container gets, seen from inside one."""
    assert client.ping()
    # Detached, then waited for and read: an attached run follows the log stream, and Podman's API can leave
    # that stream open after a container that exits at once has gone (a run that hung here for 300 s).
    container = client.containers.run(
        base.ensure_base(client), ["sh", "-c", "cat /proc/self/limits /sys/fs/cgroup/memory/memory.limit_in_bytes"],
        detach=True, mem_limit=64 << 20, ulimits=base.ulimits(), labels={"io.xferbench.owner": "test"},
    )
    try:
        assert container.wait(timeout=60)["StatusCode"] == 0
        out = container.logs(stdout=True, stderr=False).decode().splitlines()
    finally:
        container.remove(force=True)
    limits = {ln[:26].strip(): ln[26:].split()[:2] for ln in out if ln.startswith("Max ")}
    soft_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert limits["Max open files"] == [str(min(base.WANT_NOFILE, soft_nofile))] * 2
    assert int(limits["Max processes"][0]) <= base.WANT_NPROC
    assert int(out[-1]) == 64 << 20
