"""The container backend's tests run on a real Docker-API engine (docs/EXPERIMENTS.md, "Servers in
containers"): DOCKER_HOST, an engine already answering, or the Podman service the project starts itself.

Policy when no engine can be had (no podman/runc, not root, no cgroup controllers): every test here FAILS
with the one-line reason, which is also printed in the test summary. Setting XFERBENCH_DOCKER=off turns the
failures into skips carrying the same reason (for machines that are known not to run containers); the
summary line still says why. Nothing is skipped silently."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from xferbench.config import ROOT
from xferbench.run.containers import LABEL, engine
from xferbench.run.containers import images as server_images
from xferbench.run.containers.engine import EngineError

_why_not: list[str] = []


@pytest.fixture(scope="session")
def client() -> Iterator[docker.DockerClient]:
    try:
        c = engine.ensure()
    except EngineError as e:
        _why_not.append(str(e))
        if os.environ.get("XFERBENCH_DOCKER") == "off":
            pytest.skip(f"XFERBENCH_DOCKER=off and {e}")
        pytest.fail(f"the Docker path cannot run here: {e}", pytrace=False)
    yield c
    c.close()


@pytest.fixture(scope="session")
def images(client: docker.DockerClient) -> dict[str, str]:
    """The runner's own server images (`xferbench images build`: build/bin on the debootstrap base), built
    here when missing or stale, as a docker-backend run builds them."""
    return server_images.ensure(client, ["xferd-go", "xferd-c"])


def runner_containers(client: docker.DockerClient, runner_pid: int | None = None) -> list[str]:
    """The runner containers that exist now (of one runner process, when given), running or not."""
    label = [f"{LABEL}=runner"] + ([f"io.xferbench.runner-pid={runner_pid}"] if runner_pid else [])
    return [f"{c.name} ({c.status})" for c in client.containers.list(all=True, filters={"label": label})]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for why in _why_not:
        terminalreporter.write_line(f"container tests: no engine: {why}", red=True)


def long_cell(path: Path, image: str, name: str, sizes: str, limits: str = "") -> Path:
    """An experiment of one xferd-go container cell that lasts a minute (the tests stop or kill it before)."""
    path.write_text(
        f'[experiment]\nname = "{name}"\nrepeats = 1\nwarmup_s = 1\nduet = false\nbackend = "docker"\n'
        f'[load]\ntransport = "grpc"\nrate = "10"\nusers = 2\nduration_s = 60\nsizes = "{sizes}"\n'
        f'[[servers]]\nserver = "xferd-go"\nimage = "{image}"\n{limits}'
    )
    return path


def start_run(exp: Path, run_dir: Path, *args: str) -> subprocess.Popen[str]:
    """`xferbench run EXP --out RUN_DIR ARGS` as a process of its own, its stderr kept for the failure message."""
    return subprocess.Popen([sys.executable, "-m", "xferbench", "run", str(exp), "--out", str(run_dir), *args],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
