"""A command server's configuration file, placeholders and paths (xferbench/config/command.py, commandfiles.py,
placeholders.py; xferbench/run/commandserver.py, commandfolders.py), with real processes: Debian's nginx from the
shipped template with no wrapper, its master and workers measured whole; {tmpdir} made and removed; relative
paths from the experiment's folder; refusals when the experiment is read. Each run is 1 s of warm-up and 2 s
measured."""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.runs import experiment_file
from xferbench import config as xe
from xferbench.config.command import Command
from xferbench.measure.sources import ScrapeSource
from xferbench.run import commandserver, sweep
from xferbench.run.process import ServerStartError

ROOT = Path(__file__).resolve().parents[2]
THIRD_PARTY = ROOT / "experiments" / "third-party"
ECHO_SERVER = ROOT / "tests" / "support" / "echo_grpc.py"
NGINX = "/usr/sbin/nginx"
HEAD = '[experiment]\nname = "{name}"\nrepeats = 1\nduet = false\nwarmup_s = 1\n'


def test_nginx_from_the_shipped_template_is_measured_whole(tmp_path: Path) -> None:
    """The shipped nginx.toml's server, cut to one cell: its template and locustfile copied beside the
    experiment file, so they are found from its folder (the test runs in the repository's root)."""
    assert Path(NGINX).exists(), "nginx is not installed: run scripts/bootstrap.sh (Debian's nginx; no skip)"
    for name in ("nginx.conf.in", "nginx_locustfile.py"):
        shutil.copy(THIRD_PARTY / name, tmp_path / name)
    shipped = (THIRD_PARTY / "nginx.toml").read_text()
    entry = shipped[shipped.index("[[servers]]"):].replace('alloc = ["glibc", "jemalloc"]', 'alloc = "jemalloc"')
    load = ('[load]\nusers = 2\nspawn_rate = 2\nduration_s = 2\nlocustfile = "nginx_locustfile.py"\n'
            "paced = true\n")
    exp = experiment_file(tmp_path / "exp.toml", HEAD.format(name="nginx") + load + entry)
    row = sweep.sweep(exp, tmp_path / "run").rows[0]
    assert row.ok, (row.error, row.stderr_tail)
    assert row.procs_peak is not None and row.procs_peak >= 3, row.procs_peak  # the master and both workers
    # jemalloc found in the maps of the master once ready, and of both workers it forks after it listens.
    assert row.ready and Path(row.ready["alloc_lib"]).name.startswith("libjemalloc.so"), row.ready
    assert row.ready["procs_checked"] == "3", row.ready
    assert row.server_cpu_per_op_s is not None and row.server_cpu_per_op_s > 0
    assert row.client_requests and not row.client_failures
    (conf,) = (tmp_path / "run" / "files").glob("*/nginx.conf")  # rendered into the run's own folder
    text = conf.read_text()
    assert f"listen 127.0.0.1:{row.ready['grpc'].split(':')[1]};" in text and f"pid {conf.parent}/nginx.pid;" in text
    assert "{" + "port}" not in text and not list(conf.parent.glob(".*.tmp"))
    assert row.config["command"]["files"] == {"nginx.conf": str(tmp_path / "nginx.conf.in")}


def _script(tmp_path: Path) -> None:
    """bin/serve: a program at a relative path, our echo server under it."""
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin" / "serve"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ECHO_SERVER}" "$@"\n')
    script.chmod(0o755)


ECHO = """
[[servers]]
server = "command"
label = "echo"
command = ["bin/serve", "{port}", "{tmpdir}"]
ready = { log = "^serving on {port}$" }   # filled: a line naming another port would not do
cwd = "."
[servers.env]
PYTHONPATH = "ROOT"
DATA = "{tmpdir}/data"
"""


def test_tmpdir_relative_program_cwd_and_a_filled_ready_log(tmp_path: Path) -> None:
    _script(tmp_path)
    text = HEAD.format(name="t") + '[load]\ntransport = "grpc"\n' + ECHO.replace("ROOT", str(ROOT))
    (cell,) = experiment_file(tmp_path / "exp.toml", text).cells
    assert isinstance(cell.kind, Command) and cell.kind.argv[0] == str(tmp_path / "bin" / "serve")
    server = commandserver.start(cell, None, None)
    try:
        tmpdir = Path(server.argv[-1])
        assert tmpdir.is_dir() and tmpdir != tmp_path, server.argv  # made for this start
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        assert f"DATA={tmpdir}/data".encode() in environ
        assert os.readlink(f"/proc/{server.pid}/cwd") == str(tmp_path)  # cwd = "." is the experiment's folder
        assert f"serving on {server.ready['grpc'].split(':')[1]}$" in server.ready_line, server.ready_line
    finally:
        server.stop()
    assert not tmpdir.exists()  # removed once it stopped


def test_a_metrics_url_with_its_own_path_is_scraped_there(tmp_path: Path) -> None:
    """Spring's /actuator/prometheus, as python's http.server serves a file at that path."""
    (tmp_path / "site" / "actuator").mkdir(parents=True)
    (tmp_path / "site" / "actuator" / "prometheus").write_text("process_cpu_seconds_total 1.5\n")
    entry = f"""
[[servers]]
server = "command"
command = ["{sys.executable}", "-m", "http.server", "--bind", "127.0.0.1", "--directory", "{tmp_path}/site", "{{port}}"]
metrics = "http://127.0.0.1:{{port}}/actuator/prometheus"
"""
    (cell,) = xe.parse(tomllib.loads(HEAD.format(name="m") + entry), "m.toml").cells
    server = commandserver.start(cell, None, None)
    try:
        assert server.ready["metrics_url"].endswith("/actuator/prometheus") and ":" in server.ready["metrics"]
        source = ScrapeSource()
        source.begin(server.ready["metrics_url"], {})
        snap = source.tick()
        assert snap is not None and snap.get("process_cpu_seconds_total") == 1.5, source.url
    finally:
        server.stop()


def _parse(entry: str, folder: Path | None = None) -> xe.Experiment:
    text = HEAD.format(name="t") + '[load]\ntransport = "grpc"\n[[servers]]\nserver = "command"\n' + entry
    return xe.parse(tomllib.loads(text), "t.toml", base_dir=folder)


PY = f'command = ["{sys.executable}", "-c", "pass", "{{port}}"]\n'
GO = f'command = ["{ROOT}/build/bin/xferd-go", "--grpc-addr", "127.0.0.1:{{port}}"]\n'


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (PY + 'metrics = "http://127.0.0.1:{metrics-port}/metrics"\n',
         "servers[0].metrics = 'http://127.0.0.1:{metrics-port}/metrics': unknown placeholder {metrics-port}; "
         "valid here: {port}, {<name>_port} (e.g. {metrics_port})"),
        (PY.replace('"pass"', '"{port2}"'), "servers[0].command[2] = '{port2}': unknown placeholder {port2}"),
        (PY + 'env = { X = "{foo}" }\n', "valid here: {port}, {<name>_port} (e.g. {metrics_port}), {dir}, {tmpdir}"),
        (PY + 'ready = { http = "http://127.0.0.1:{port}/{dir}" }\n', "servers[0].ready.http"),
        (PY + 'ready = { log = "up at {where}" }\n', "unknown placeholder {where}"),
        (PY + '[files]\n"a.conf" = "missing.in"\n', "servers[0].files.a.conf = 'missing.in': cannot read"),
        (PY + 'cwd = "nowhere"\n', "servers[0].cwd = 'nowhere': "),
        ('command = ["bin/nothing", "{port}"]\n', "servers[0].command[0] = 'bin/nothing': "),
        (f'command = ["{sys.executable}", "{{dir}}/x.conf"]\n[files]\n"x.conf" = "ok.in"\n', "needs a {port}"),
        (GO + 'gogc = "lots"\n', "servers[0].gogc = 'lots': expected"),
        (PY + 'image = "x"\ncwd = "."\n', "servers[0]: cwd is not for a command server in a container"),
    ],
)
def test_what_is_refused_when_the_experiment_is_read(tmp_path: Path, entry: str, said: str) -> None:
    (tmp_path / "t.in").write_text("listen {nope};\n")
    (tmp_path / "ok.in").write_text("listen 8080;\n")
    entry = entry.replace("[files]", "[servers.files]")
    with pytest.raises(xe.ExperimentError) as e:
        _parse(entry, tmp_path)
    assert said in str(e.value), str(e.value)


def test_a_template_with_an_unknown_placeholder_is_refused_naming_its_line(tmp_path: Path) -> None:
    (tmp_path / "t.in").write_text("# ok {port} {dir}\nlisten {host_port};\nroot {docroot};\n")
    with pytest.raises(xe.ExperimentError, match=r"servers\[0\]\.files\.x\.conf \(.*t\.in, line 3\).*\{docroot\}"):
        _parse(PY + '[servers.files]\n"x.conf" = "t.in"\n', tmp_path)


def test_paths_start_at_the_experiment_folder_and_a_missing_program_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(xe.ExperimentError) as e:
        _parse('command = ["bin/serve", "{port}"]\n', tmp_path)
    assert f"{tmp_path}/bin/serve does not exist" in str(e.value)
    _script(tmp_path)
    (cell,) = _parse('command = ["bin/serve", "{port}"]\n', tmp_path).cells
    assert isinstance(cell.kind, Command) and cell.kind.argv[0] == f"{tmp_path}/bin/serve"
    (tmp_path / "bin" / "serve").unlink()  # gone between reading the experiment and its run
    with pytest.raises(ServerStartError, match=f"command\\[0\\]: {tmp_path}/bin/serve does not exist"):
        commandserver.start(cell, None, None)


def test_gogc_as_a_string_is_an_axis_for_a_go_command() -> None:
    exp = _parse(GO + 'gogc = ["100", "400"]\n')
    assert [c.flags["gogc"] for c in exp.cells] == ["100", "400"]
    assert exp.cells[0].name.endswith("gogc=100"), exp.cells[0].name
