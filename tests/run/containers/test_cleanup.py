"""No container outlives its cell: also when the runner gets SIGTERM or Ctrl-C (SIGINT) in the middle of one."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import docker
import pytest

from tests.run.containers.conftest import long_cell, runner_containers, start_run

DEADLINE_S = 90.0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_cell_removes_the_container(client: docker.DockerClient, images: dict[str, str], tmp_path: Path,
                                               sig: signal.Signals) -> None:
    exp = long_cell(tmp_path / "exp.toml", images["xferd-go"], "ctr-cleanup", "256KiB",
                    '[servers.limits]\nmemory = "128MiB"\n')
    run_dir = tmp_path / "run"
    proc = start_run(exp, run_dir)
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
