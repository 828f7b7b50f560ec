"""`xferbench run`'s exit status says how the run went: 0 every run measured, 3 some runs failed (the report
still written), 1 every run failed, 2 refused before anything started (an unreachable --prometheus too)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.runs import one_round, xferbench_run

GOOD = """
[[servers]]
server = "xferd-c"
label = "good"
"""
BAD = """
[[servers]]
server = "xferd-c"
label = "bad"
args = ["--alloc=nope"]
"""


def _run(tmp_path: Path, cells: str, *args: str) -> subprocess.CompletedProcess[str]:
    exp = tmp_path / "exp.toml"
    exp.write_text(one_round(exp.stem) + 'mix = "echo:1"\n' + cells)
    return xferbench_run(str(exp), "--out", str(tmp_path / "run"), *args)


@pytest.mark.parametrize(("cells", "status"), [(GOOD + BAD, 3), (BAD, 1)], ids=["some-failed", "all-failed"])
def test_failed_runs_set_the_status(tmp_path: Path, cells: str, status: int) -> None:
    proc = _run(tmp_path, cells)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert "runs failed" in proc.stdout
    assert (tmp_path / "run" / "report.html").stat().st_size > 0  # the report exists either way


def test_unreachable_prometheus_stops_before_any_server(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        proc = _run(tmp_path, GOOD + GOOD.replace("good", "good2"), "--prometheus", url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("--prometheus") == 1 and url in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()  # no server started, nothing written
    assert time.monotonic() - t0 < 30
