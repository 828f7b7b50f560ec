"""The probe before the first run (xferbench/run/preflight.py), a failed run's reason on screen and in the
reports, and `[load] options` passed to a user's locustfile. `xferbench run` as a process against real servers
on loopback: a probe's refusal exits 2 with its one line and writes no run; a run is 1 s of warm-up and 2 s
measured."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.runs import experiment_file, xferbench_run
from xferbench import config as xe
from xferbench.run import sweep

ROOT = Path(__file__).resolve().parents[2]
OPTION_LOCUSTFILE = ROOT / "tests" / "support" / "option_locustfile.py"


def _head(name: str, load: str) -> str:
    return (
        f'[experiment]\nname = "{name}"\nrepeats = 1\nduet = false\nwarmup_s = 1\n'
        f"[load]\nusers = 2\nspawn_rate = 2\nduration_s = 2\n{load}"
    )


GO = '\n[[servers]]\nserver = "xferd-go"\n'


def _http(site: Path, env: str = "") -> str:
    """`python -m http.server` as a command server on {port}, serving `site`; `env`: [servers.env] lines."""
    return (
        f'\n[[servers]]\nserver = "command"\nlabel = "http"\ncommand = ["{sys.executable}", "-m", "http.server", '
        f'"--bind", "127.0.0.1", "--directory", "{site}", "{{port}}"]\n' + (f"[servers.env]\n{env}" if env else "")
    )


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("hello\n")
    return site


def _refused(tmp_path: Path, text: str) -> str:
    """Runs the experiment; asserts the probe refused it before any run. Its message, unwrapped."""
    (tmp_path / "exp.toml").write_text(text)
    out = tmp_path / "run"
    proc = xferbench_run(str(tmp_path / "exp.toml"), "--out", str(out), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not (out / "runs.jsonl").exists(), proc.stderr  # no run started, so no row written
    said = " ".join(proc.stderr.split())  # the console wraps long lines
    assert "no run was started" in said, said
    return said


def test_a_method_the_server_lacks_stops_the_run_before_any_run(tmp_path: Path) -> None:
    said = _refused(tmp_path, _head("nope", 'rate = "50"\ncall = "xfer.v1.FileTransfer/Nope"\n') + GO)
    assert 'cell "go/grpc": load.call = \'xfer.v1.FileTransfer/Nope\'' in said, said
    assert "has no method 'Nope'; it has: Download, Echo, Meta, Stat, Upload" in said, said


def test_no_probe_leaves_the_method_to_each_run(tmp_path: Path) -> None:
    """--no-probe: the run starts and fails on its own, Locust's line shown as its reason."""
    (tmp_path / "exp.toml").write_text(_head("nope", 'rate = "50"\ncall = "xfer.v1.FileTransfer/Nope"\n') + GO)
    out = tmp_path / "run"
    proc = xferbench_run(str(tmp_path / "exp.toml"), "--out", str(out), "--no-probe", timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (row,) = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert row["status"] == "failed", row
    assert "it said: locust: error: --xfer-call: service xfer.v1.FileTransfer has no method 'Nope'" in " ".join(
        proc.stdout.split()), proc.stdout


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("from locust import HttpUser\nclass Broken(HttpUser:\n    pass\n", "SyntaxError:"),
        ("import locust\nX = 1\n", "it defines no User class"),
        ("import no_such_module_here\n", "ModuleNotFoundError: No module named 'no_such_module_here'"),
    ],
)
def test_a_broken_locustfile_stops_the_run_before_any_run(tmp_path: Path, source: str, message: str) -> None:
    (tmp_path / "users.py").write_text(source)
    said = _refused(tmp_path, _head("broken", 'locustfile = "users.py"\n') + _http(_site(tmp_path)))
    assert 'cell "http/grpc": load.locustfile = ' in said and message in said, said


def test_an_option_the_locustfile_does_not_define_stops_the_run(tmp_path: Path) -> None:
    load = f'locustfile = "{OPTION_LOCUSTFILE}"\noptions = {{ "greeting" = "hello", "colour" = "red" }}\n'
    said = _refused(tmp_path, _head("unknown-option", load) + _http(_site(tmp_path)))
    assert "it defines no option --colour, given in load.options" in said, said


def test_a_placeholder_port_the_server_never_listens_on_stops_the_run(tmp_path: Path) -> None:
    """{metrics_port} is given to the server (in its environment), which never listens on it."""
    text = _head("deaf", 'rate = "50"\nmix = "echo:1"\n') + _http(_site(tmp_path), 'UNUSED = "{metrics_port}"\n')
    said = _refused(tmp_path, text)
    assert 'cell "http/grpc": the server accepts no connection on {metrics_port} (127.0.0.1:' in said, said


def test_a_failed_runs_reason_is_on_screen_and_in_the_reports(tmp_path: Path) -> None:
    """The option reaches the locustfile, which stops Locust for its wrong value: the run fails, and Locust's
    own line is in the CLI's output, summary.md and report.html, not only in runs.jsonl."""
    load = f'locustfile = "{OPTION_LOCUSTFILE}"\noptions = {{ "greeting" = "bonjour" }}\n'
    (tmp_path / "exp.toml").write_text(_head("wrong-value", load) + _http(_site(tmp_path)))
    out = tmp_path / "run"
    proc = xferbench_run(str(tmp_path / "exp.toml"), "--out", str(out), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # every run failed
    why = "option_locustfile: error: --greeting is 'bonjour', expected 'hello'"
    (row,) = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert row["status"] == "failed" and "before it was ready" in row["error"], row
    assert why in " ".join(proc.stdout.split()), proc.stdout  # the final table's failure lines
    assert why in " ".join(proc.stderr.split()), proc.stderr  # the run's own progress line
    assert f"- `http/grpc` failed r1: {row['error']}; it said: {why}" in (out / "summary.md").read_text()
    assert "--greeting is &#x27;bonjour&#x27;, expected &#x27;hello&#x27;" in (out / "report.html").read_text()


def test_load_options_reach_the_users_locustfile(tmp_path: Path) -> None:
    (tmp_path / "users").mkdir()
    shutil.copy(OPTION_LOCUSTFILE, tmp_path / "users" / "greet.py")
    load = 'locustfile = "users/greet.py"\noptions = { "greeting" = "hello" }\n'
    exp = experiment_file(tmp_path / "exp.toml", _head("options", load) + _http(_site(tmp_path)))
    assert exp.cells[0].config()["load"]["options"] == {"greeting": "hello"}
    (row,) = sweep.sweep(exp, tmp_path / "run").rows
    assert row.ok, (row.error, row.stderr_tail)
    assert row.client_requests and not row.client_failures


@pytest.mark.parametrize(
    ("load", "said"),
    [
        (f'locustfile = "{OPTION_LOCUSTFILE}"\noptions = {{ "--greeting" = "hello" }}\n',
         "load.options = {'--greeting': 'hello'}: '--greeting' is not a plain long option name"),
        (f'locustfile = "{OPTION_LOCUSTFILE}"\noptions = {{ "greeting hello" = "x" }}\n', "not a plain long option name"),
        (f'locustfile = "{OPTION_LOCUSTFILE}"\noptions = {{ "host" = "x" }}\n', "--host is the runner's"),
        (f'locustfile = "{OPTION_LOCUSTFILE}"\noptions = {{ "greeting" = [1] }}\n', "expected a string, a number or true"),
        (f'locustfile = "{OPTION_LOCUSTFILE}"\noptions = "greeting"\n', "expected a table of your locustfile's options"),
        ('options = { "greeting" = "hello" }\n', "loadgen's users take [load] keys instead"),
    ],
)
def test_bad_options_are_refused_when_read(tmp_path: Path, load: str, said: str) -> None:
    (tmp_path / "exp.toml").write_text(_head("bad", load) + GO)
    with pytest.raises(xe.ExperimentError) as e:
        xe.load_file(tmp_path / "exp.toml")
    assert said in str(e.value) and "\n" not in str(e.value), e.value
