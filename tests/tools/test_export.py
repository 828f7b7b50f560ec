"""`xferbench export`'s refusals of bad input: not a run directory, a run with nothing recorded. Through
`cli.main` in this process, and once as a process, for the command's own exit status and message. The export of
a real run into a real Prometheus is test_export_backfill.py (make test-slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.promcheck import ROOT
from xferbench import cli


def xferbench(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xferbench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_not_a_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = xferbench("export", str(tmp_path), timeout=60)  # the command's own exit status and message
    assert r.returncode == 2 and "not a run directory" in r.stderr and "runs.jsonl" in r.stderr, r.stderr
    assert cli.main(["export", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err, err


def test_empty_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs.jsonl").write_text(
        json.dumps({"cell": "c", "server": "xferd-go", "repeat": 1, "timeseries": None, "status": "failed"}) + "\n")
    assert cli.main(["export", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "empty run" in err, err
    assert not (tmp_path / "openmetrics.txt").exists() and not (tmp_path / "openmetrics.txt.tmp").exists()
