"""The probe before the first run: what a user wrote that every run of a cell would fail on, found once and said
in one line, rather than run by run behind "locust ... exited with status 2 before it was ready".

Only where there is something of the user's to check, once per distinct (server configuration, load):
- a `[load] locustfile` is imported in a process of its own as Locust would (the project's Python, the
  repository's root, the runner's environment): it must import, define a User class and know each of
  `[load] options`. No server is needed.
- a `[load] call`'s methods are looked up on the cell's server, started as a run starts it (serverstart.py), by
  loadgen's own resolver (its reflection or the given .proto / protoset), and `data` encoded for each.
- a command server with named placeholder ports (`{metrics_port}`, ...) must accept a TCP connection on every
  placeholder port once it is ready.
Loadgen's own users on our registry servers have nothing to probe, so an experiment of those pays nothing.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xferbench.analysis import failure
from xferbench.config import ROOT, Cell, Experiment
from xferbench.config.userload import option_args
from xferbench.measure.sources import ScrapeSource
from xferbench.run.handle import ServerHandle
from xferbench.run.live import CellFailed, Live, new_row
from xferbench.run.matrix import Run
from xferbench.run.process import ServerStartError, port_open
from xferbench.run.progress_protocol import NullProgress
from xferbench.run.serverstart import start_server

PORTS_GRACE_S = 3.0  # a server ready on {port} may open its other listeners a moment later
IMPORT_TIMEOUT_S = 60.0
POLL_S = 0.05

# Run with the locustfile's path and its [load] options: imports it as Locust does (locust.util.load_locustfile),
# then parses the options with the parser Locust builds (its own, plus the locustfile's init_command_line_parser).
# Its one line on stderr says what is wrong.
_IMPORT_CHECK = """
import sys
path, options = sys.argv[1], sys.argv[2:]
def fail(text):
    sys.stderr.write(" ".join(text.split()) + "\\n")
    sys.exit(3)
try:
    from locust.util.load_locustfile import load_locustfile
    users, _ = load_locustfile(path)
except BaseException as e:
    fail(f"{type(e).__name__}: {e}")
if not users:
    fail("it defines no User class (a class of locust's User, HttpUser, FastHttpUser, ..., not abstract)")
if options:
    from locust.argument_parser import get_parser
    _, unknown = get_parser().parse_known_args(options)
    unknown = [u for u in unknown if u.startswith("--")]
    if unknown:
        fail(f"it defines no option {unknown[0]}, given in load.options (add it with @events.init_command_line_parser)")
"""


class PreflightError(RuntimeError):
    """What every run of a cell would fail on: one line naming the cell."""


class _Failed(RuntimeError):
    """A probe's finding, before the cell's name is put in front of it."""


def probed(cell: Cell) -> bool:
    """Whether the cell has anything of the user's to check before its runs."""
    return bool(cell.load.locustfile) or _on_server(cell)


def _on_server(cell: Cell) -> bool:
    """Whether the cell's checks need its server: a call's methods, or ports beyond {port} to try (here: a command
    on another host listens on that host's ports, which only a run, placed by the host check, knows)."""
    return bool(cell.load.call) or (bool(cell.kind.probed_ports) and cell.host is None)


def check(exp: Experiment) -> None:
    """Probes each distinct cell that has something to check; raises PreflightError on the first finding."""
    seen: set[str] = set()
    imported: set[tuple[str, ...]] = set()  # a locustfile with its options, whatever server it is aimed at
    for cell in exp.cells:
        key = json.dumps(cell.config(), sort_keys=True, default=str)  # an A/A copy is the same configuration
        if not probed(cell) or key in seen:
            continue
        seen.add(key)
        try:
            users = (cell.load.locustfile, *option_args(cell.load.options)) if cell.load.locustfile else None
            if users is not None and users not in imported:
                imported.add(users)
                _check_locustfile(users[0], list(users[1:]))
            if _on_server(cell):
                _check_server(exp, cell)
        except _Failed as e:
            raise PreflightError(f'cell "{cell.name}": {e}') from None


def _check_locustfile(path: str, options: list[str]) -> None:
    try:
        r = subprocess.run([sys.executable, "-c", _IMPORT_CHECK, path, *options], cwd=ROOT, env=dict(os.environ),
                           capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise _Failed(f"load.locustfile = {path!r}: importing it took more than {IMPORT_TIMEOUT_S:g}s") from None
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]  # the check's own line is its last
        said = lines[-1].strip() if lines else f"exit status {r.returncode}"
        raise _Failed(f"load.locustfile = {path!r}: {said}")


def _check_server(exp: Experiment, cell: Cell) -> None:
    """The cell's server started as a run starts it (its log in a folder of the probe's), checked, stopped."""
    with tempfile.TemporaryDirectory(prefix="xferbench-probe-") as tmp:
        (Path(tmp) / "logs").mkdir()
        run = Run(0, 0, cell, "probe")
        live = Live(exp, run, Path(tmp), new_row(exp, run, ScrapeSource()), ScrapeSource(), NullProgress())
        try:
            server = start_server(live)
        except (ServerStartError, CellFailed) as e:
            why = failure.reason(str(e), e.tail)
            raise _Failed(f"the server did not start: {e}" + (f"; it said: {why}" if why else "")) from None
        try:
            if cell.load.call:
                try:
                    address = server.addr(cell.transport)
                except KeyError as e:
                    raise _Failed(str(e.args[0])) from None
                _check_call(cell, address)
            _check_ports(server)
        finally:
            server.stop()


def _check_call(cell: Cell, address: str) -> None:
    """Every method of `call` found by loadgen's resolver, as CallUser finds it when Locust starts, and its
    request encoded from `data`; loadgen's --xfer-<key> in its message becomes the TOML key, load.<key>."""
    import loadgen
    from loadgen._call_options import parse_calls, templates
    from loadgen._call_requests import Requests
    from loadgen._methods import resolve_all
    from loadgen._template import Context, parse_data

    load = cell.load
    assert load.call is not None
    try:
        specs = parse_calls(load.call)
        data = templates(specs, loadgen.option("data").parse(load.data or ""))
        import_path = loadgen.option("import_path").parse(load.import_path or "")
        methods = resolve_all([s.name for s in specs], address, load.proto or "", import_path, load.protoset or "")
        for method, spec in zip(methods, specs, strict=True):
            template = data[spec.name] or parse_data("[]" if method.client_streaming else "{}")
            assert template is not None
            Requests(method, template, Context(0, 1, "lg-sample", random.Random(0)))
    except ValueError as e:
        said = re.sub(r"--xfer-([a-z][a-z-]*)", lambda m: "load." + m[1].replace("-", "_"), str(e))
        raise _Failed(f"load.call = {load.call!r}: {said.removeprefix('load.call: ')}") from None


def _check_ports(server: ServerHandle) -> None:
    """A connection accepted on every placeholder port (ready's `ports=` field), within PORTS_GRACE_S."""
    ports = dict(p.split("=", 1) for p in server.ready.get("ports", "").split(",") if "=" in p)
    deadline = time.monotonic() + PORTS_GRACE_S
    for name, port in ports.items():
        while not port_open("127.0.0.1", int(port)):
            if not server.alive():
                raise _Failed(f"the server {server.exit_text()} once ready, before {{{name}}} was checked")
            if time.monotonic() > deadline:
                raise _Failed(
                    f"the server accepts no connection on {{{name}}} (127.0.0.1:{port}) {PORTS_GRACE_S:g}s after it "
                    f"was ready: its command must listen on every placeholder port it is given"
                )
            server.wait(POLL_S)
