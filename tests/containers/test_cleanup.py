"""No container outlives its cell: also when the runner gets SIGTERM or Ctrl-C (SIGINT) in the middle of one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from tests.containers.conftest import runner_containers
from xferbench.experiment import ROOT

DEADLINE_S = 90.0


def _experiment(path: Path, image: str) -> Path:
    path.write_text(
        '[experiment]\nname = "ctr-cleanup"\nrepeats = 1\nwarmup_s = 1\nduet = false\nbackend = "docker"\n'
        '[load]\ntransport = "grpc"\nrate = "10"\nusers = 2\nduration_s = 60\nsizes = "256KiB"\n'
        f'[[servers]]\nserver = "xferd-go"\nimage = "{image}"\n[servers.limits]\nmemory = "128MiB"\n'
    )
    return path


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_cell_removes_the_container(client: docker.DockerClient, images: dict[str, str], tmp_path: Path,
                                               sig: signal.Signals) -> None:
    exp = _experiment(tmp_path / "exp.toml", images["xferd-go"])
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "xferbench", "run", str(exp), "--out", str(run_dir)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        # Mid-cell: the server's container is up and the load has started (Locust's log exists).
        while not (runner_containers(client, proc.pid) and list((run_dir / "logs").glob("*.locust.log"))):
            if proc.poll() is not None:
                pytest.fail(f"the runner ended before its cell started: {proc.stderr.read() if proc.stderr else ''}")
            assert time.monotonic() < deadline, "no container of the runner appeared"
            time.sleep(0.2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 130, err[-2000:]
    assert runner_containers(client, proc.pid) == []
    rows = [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["interrupted"]
