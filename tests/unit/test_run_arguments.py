"""`xferbench run` refuses malformed --until-ci / --budget values before anything starts, and says why.

Every value goes through the command's own parser in this process (`cli.main`; argparse exits with status 2);
one goes through `python -m xferbench run` as well, for the process's exit status and message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xferbench import cli

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
def test_bad_until_ci_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                needle: str) -> None:
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as refused:
        cli.main(["run", str(ROOT / "experiments" / "quick.toml"), "--out", str(out), *args])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert needle in err, err
    assert not out.exists()  # refused before any server started


def test_bad_until_ci_argument_as_a_process(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "xferbench", "run", "experiments/quick.toml", "--out", str(out), "--until-ci", "abc"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "argument --until-ci: 'abc': want a percentage such as 5%" in proc.stderr
    assert not out.exists()  # refused before any server started
