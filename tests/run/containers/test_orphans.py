"""A runner killed with SIGKILL runs no cleanup: its server's container outlives it. The next `xferbench run`
with the docker backend removes it before it starts anything (runner.container_engine →
backend.remove_orphans: runner containers whose runner-pid label names a process that is gone), and leaves
alone the containers of a runner that still lives and those that are not xferbench's.

(tests/run/containers/test_cleanup.py covers SIGTERM and SIGINT, after which the runner removes its own.)
About 30 s on 2 loaded cores: two real runs, each starting a container; it cannot be shorter."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

import docker
import pytest

from tests.run.containers.conftest import long_cell, runner_containers, start_run
from xferbench.run.containers import LABEL
from xferbench.run.containers.backend import RUNNER_PID_LABEL

DEADLINE_S = 90.0


def test_next_run_removes_the_containers_of_a_runner_killed_with_sigkill(
        client: docker.DockerClient, images: dict[str, str], tmp_path: Path) -> None:
    exp = long_cell(tmp_path / "exp.toml", images["xferd-go"], "ctr-orphans", "64KiB")
    tag = uuid.uuid4().hex[:8]
    # Containers that must stay: one of a runner that lives (this test's own pid), one of another project.
    live = client.containers.create(images["xferd-go"], name=f"xferbench-test-live-runner-{tag}",
                                    labels={LABEL: "runner", RUNNER_PID_LABEL: str(os.getpid())})
    foreign = client.containers.create(images["xferd-go"], name=f"not-xferbench-{tag}", labels={"owner": "else"})
    killed = start_run(exp, tmp_path / "killed")
    try:
        deadline = time.monotonic() + DEADLINE_S
        # Mid-cell: the server's container is up and the load has started (Locust's log exists).
        while not (runner_containers(client, killed.pid) and list((tmp_path / "killed" / "logs").glob("*.locust.log"))):
            if killed.poll() is not None:
                pytest.fail(f"the runner ended before its cell started: {killed.stderr.read() if killed.stderr else ''}")
            assert time.monotonic() < deadline, "no container of the runner appeared"
            time.sleep(0.2)  # poll interval
        killed.send_signal(signal.SIGKILL)
        assert killed.wait(timeout=30) == -signal.SIGKILL
        orphans = runner_containers(client, killed.pid)
        assert len(orphans) == 1, f"the SIGKILLed runner's container is not there to clean up: {orphans}"

        nxt = start_run(exp, tmp_path / "next", "--quick")
        try:
            _, err = nxt.communicate(timeout=DEADLINE_S)
        finally:
            if nxt.poll() is None:
                nxt.kill()
                nxt.wait(timeout=10)
        assert nxt.returncode == 0, err[-3000:]
        rows = [json.loads(x) for x in (tmp_path / "next" / "runs.jsonl").read_text().splitlines()]
        assert [r["status"] for r in rows] == ["ok"], [(r["status"], r["error"]) for r in rows]
        assert runner_containers(client, killed.pid) == [], "the next run left the orphan"
        assert runner_containers(client, nxt.pid) == [], "the next run left its own container"
        for c in (live, foreign):  # still there: a live runner's and another project's
            c.reload()
            assert c.status == "created", (c.name, c.status)
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait(timeout=10)
        for c in [live, foreign, *client.containers.list(all=True, filters={"label": f"{RUNNER_PID_LABEL}={killed.pid}"})]:
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass
