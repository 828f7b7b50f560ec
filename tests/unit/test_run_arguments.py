"""`xferbench run` refuses malformed --until-ci / --budget values before anything starts, and says why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--until-ci", "abc"), "want a percentage such as 5%"),
        (("--until-ci", "150%"), "between 0% and 100%"),
        (("--until-ci", "5%", "--budget", "ten minutes"), "want a duration such as 10m"),
        (("--until-ci", "5%", "--budget=-5m"), "want a positive duration"),
        (("--until-ci", "5%", "--budget", "0s"), "want a positive duration"),
    ],
)
def test_bad_until_ci_arguments(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "xferbench", "run", "experiments/quick.toml", "--out", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr
    assert not out.exists()  # refused before any server started
