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


def test_a_refusal_in_a_log_is_one_line_however_long(tmp_path: Path) -> None:
    """stderr is a pipe here, as in CI or a log: the message is not wrapped at 80 columns, so a path or a key is
    never cut in two."""
    exp = tmp_path / ("a-long-folder-name-" * 4) / "exp.toml"
    exp.parent.mkdir()
    exp.write_text('[experiment]\nname = "x"\nrepeats = "three"\n[[servers]]\nserver = "xferd-go"\n')
    proc = subprocess.run([sys.executable, "-m", "xferbench", "run", str(exp), "--out", str(tmp_path / "run")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and len(lines[0]) > 120 and str(exp) in lines[0], proc.stderr


def test_a_shipped_experiment_in_a_folder_runs_by_its_name_and_is_listed() -> None:
    from xferbench.config.files import EXPERIMENTS_DIR, resolve

    assert resolve("memcached") == EXPERIMENTS_DIR / "third-party" / "memcached.toml"
    assert resolve("quick") == EXPERIMENTS_DIR / "quick.toml"
    proc = subprocess.run([sys.executable, "-m", "xferbench", "list"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("third-party/memcached.toml", "third-party/etcd.toml", "third-party/nginx.toml", "quick.toml"):
        assert name in proc.stdout, proc.stdout
