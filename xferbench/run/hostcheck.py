"""The host check: before any cell of an experiment with [hosts] (and by `xferbench hosts check`), each host is
reached over SSH and asked, in one session, by the Python it would run the load with:

- that it imports locust, loadgen and xferbench from its `root`, and at which versions: its project version
  (`git describe --always --dirty` of its checkout, else the package version) must be this checkout's, and its
  Locust this one's (a master and workers of different Locusts do not talk), else the run is refused naming both;
- its hostname, kernel, CPU model, the CPUs its processes may use and how many of them are idle (/proc/stat over
  half a second), for the placement;
- its clock against this machine's, NTP-style: this machine's time before and after each of a few exchanges in
  the open session, offset = remote - midpoint of the best (shortest) one, whose half round trip bounds it; measured
  again the same way once the sweep's last run has ended (`end_clocks`, the probe run with --clock, which imports
  nothing), so the run records both;
- for a host a server runs on (`[[servers]] host`), its address as this machine reaches it (its SSH_CONNECTION),
  where the server will listen (xferbench/run/remoteserver.py); for a command server there, its program (command[0],
  an absolute path or a name on that host's PATH) found there and executable, and read there for the checks of
  alloc and the Go keys that a program here gets when the experiment is read (xferbench/config/command.py);
- for a host the load runs on (`[load] hosts`), that it connects to the address the servers will listen on: this
  machine's address as the first load host sees it (its SSH_CONNECTION, which is the route's source address),
  where a listener of the check's own waits for the connection.

Any failure is one HostCheckError naming the host; the facts become the run's `placement` (experiment.json and
the report's "Placement" line).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from xferbench.analysis.runmeta import HostFacts, Placement
from xferbench.config import ROOT, Cell, Experiment, Host, command
from xferbench.run import remote, remote_probe

CLOCK_EXCHANGES = 7
CONNECT_TIMEOUT_S = 3.0
SESSION_TIMEOUT_S = 90.0  # the whole session of one host: ssh, the Python's imports, the exchanges
END_TIMEOUT_S = 30.0  # the session of the clock at the end: ssh and the exchanges, no imports
FREE_SAMPLE_S = 0.5

# Run on the host as `PYTHON -c PROBE ROOT` from ROOT (xferbench/run/remote_probe.py says what it answers): sent as
# text, since the host may lack xferbench, which is one thing the probe checks.
PROBE = Path(remote_probe.__file__).read_text()

# Run on a command server's host as `PYTHON -c PROGRAM_CHECK COMMAND0 LIB...`: one JSON line, where command[0] is
# there (a path, or found on its PATH as the server's watch will run it), whether it can run, its ELF facts (by
# command.elf_info's own text: the facts a program here is judged by), and which of the allocator libraries exist.
PROGRAM_CHECK = "\n".join([
    "from __future__ import annotations",
    "import json, os, shutil, struct, sys",
    "from pathlib import Path",
    inspect.getsource(command.elf_info),
    "def main():",
    "    exe, libs = sys.argv[1], sys.argv[2:]",
    "    path = exe if '/' in exe else shutil.which(exe)",
    "    out = {'path': path, 'libs': [lib for lib in libs if os.path.exists(lib)]}",
    "    if path is None:",
    "        out['error'] = 'not found on its PATH'",
    "    elif not os.path.isfile(path):",
    "        out['error'] = 'does not exist there'",
    "    elif not os.access(path, os.X_OK):",
    "        out['error'] = 'is not executable there'",
    "    else:",
    "        try:",
    "            info = elf_info(Path(path))",
    "            out['elf'] = None if info is None else list(info)",
    "        except (OSError, IndexError, struct.error) as e:",
    "            out['elf_error'] = str(e)",
    "    print(json.dumps(out))",
    "main()",
    "",
])


class HostCheckError(RuntimeError):
    """A host that cannot take its part: one line starting with the host's name and ssh target."""


def project_version() -> tuple[str | None, str | None]:
    """This checkout's `git describe --always --dirty` (None outside a checkout) and the package's version."""
    describe = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        r = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True,
                           timeout=30, check=False)
        describe = r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None
    try:
        package: str | None = importlib.metadata.version("xferbench")
    except importlib.metadata.PackageNotFoundError:
        package = None
    return describe, package


class _Probe:
    """One host's session of the check, its facts as they come."""

    def __init__(self, host: Host, roles: list[str], facts: HostFacts | None = None,
                 timeout_s: float = SESSION_TIMEOUT_S) -> None:
        self.host = host
        self.facts = facts or HostFacts(host.name, host.ssh, roles=roles)
        self.timeout_s = timeout_s
        self.describe: str | None = None
        self.package: str | None = None
        self.session: remote.Session | None = None
        self._timer: threading.Timer | None = None
        self._expired = False

    def fail(self, text: str) -> HostCheckError:
        return HostCheckError(f"{self.host.describe()}: {text}")

    def _open(self, arg: str) -> Any:
        """Starts the session (the probe with `arg`) and reads its first line of JSON."""
        h = self.host
        cmd = ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", h.root, h.python, "-c", PROBE, arg]
        try:
            self.session = remote.session(h, cmd)
        except remote.RemoteError as e:
            raise HostCheckError(str(e)) from None
        self._timer = threading.Timer(self.timeout_s, self._expire)
        self._timer.daemon = True
        self._timer.start()
        first = self._read(f"running {h.python} in {h.root}")
        for _ in range(50):  # a login script's chatter before the facts: passed over
            if not isinstance(first, str):
                break
            first = self._read(f"running {h.python} in {h.root}")
        return first

    def start(self) -> None:
        """Starts the session and reads the facts line."""
        h = self.host
        facts = self._open(h.root)
        if not isinstance(facts, dict):
            raise self.fail(f"{h.python} answered {facts!r}, not the check's facts")
        if "error" in facts:
            raise self.fail(f"{h.python} (root {h.root}) {facts['error']}: it needs this project and its "
                            "dependencies (install the project there into a venv at this checkout's path, or "
                            "name its python in [hosts])")
        f = self.facts
        f.hostname, f.kernel, f.cpu_model = facts.get("hostname"), facts.get("kernel"), facts.get("cpu_model")
        f.cpus, f.python, f.python_version = facts.get("cpus"), facts.get("python"), facts.get("python_version")
        f.locust = facts.get("locust")
        self.describe, self.package = facts.get("describe"), facts.get("package")
        f.project = self.describe or self.package
        conn = str(facts.get("ssh_connection") or "").split()
        if len(conn) == 4:
            f.here, f.address = conn[0], conn[2]

    def _expire(self) -> None:
        self._expired = True
        if self.session is not None:
            self.session.proc.kill()

    def _read(self, doing: str) -> Any:
        assert self.session is not None
        line = self.session.readline()
        if not line:
            err = self.session.error(doing)
            if self._expired:
                raise self.fail(f"{doing}: the check got no answer within {self.timeout_s:g}s")
            raise HostCheckError(str(err)) from None
        try:
            return json.loads(line)
        except ValueError:
            return line.strip()  # not the probe's: the caller says what it expected

    def clock(self) -> tuple[float, float]:
        """The clock exchanges: the offset of the best (shortest) one, and half its round trip."""
        assert self.session is not None
        best: tuple[float, float] | None = None  # (round trip, offset)
        for _ in range(CLOCK_EXCHANGES):
            t0 = time.time()
            self.session.send("t")
            theirs = self._read("reading its clock")
            t1 = time.time()
            if not isinstance(theirs, float | int):
                raise self.fail(f"reading its clock: it answered {theirs!r}")
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, float(theirs) - (t0 + t1) / 2)
        assert best is not None
        return round(best[1], 6), round(best[0] / 2, 6)

    def end_clock(self) -> None:
        """The clock measured again (the probe with --clock), into the facts' clock_end_* fields."""
        said = self._open("--clock")
        if not isinstance(said, dict) or not said.get("clock"):
            raise self.fail(f"{self.host.python} answered {said!r}, not the probe's")
        self.facts.clock_end_offset_s, self.facts.clock_end_uncertainty_s = self.clock()

    def exchange(self, server: tuple[str, int] | None) -> None:
        """The clock exchanges, the connection to the servers' address (a load host), the idle CPUs; then the
        session ends."""
        assert self.session is not None
        self.facts.clock_offset_s, self.facts.clock_uncertainty_s = self.clock()
        if server is not None:
            addr, port = server
            self.session.send(f"connect {addr} {port} {CONNECT_TIMEOUT_S:g}")
            said = self._read(f"connecting to {addr}:{port}")
            if not isinstance(said, dict) or not said.get("ok"):
                why = said.get("error") if isinstance(said, dict) else said
                raise self.fail(f"cannot reach this machine at {addr}:{port}, where the servers will listen for its "
                                f"load: {why}")
        self.session.send(f"end {FREE_SAMPLE_S:g}")
        free = self._read("reading its idle CPUs")
        if isinstance(free, dict) and isinstance(free.get("cpus_free"), float | int):
            self.facts.cpus_free = round(float(free["cpus_free"]), 2)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.session is not None:
            self.session.close(timeout_s=5.0)


def _each(probes: list[_Probe], fn: Callable[[_Probe], None]) -> None:
    """`fn` on every host at once; the first failure in [hosts]' order is raised once all have answered."""
    with ThreadPoolExecutor(max_workers=max(1, len(probes)), thread_name_prefix="hostcheck") as pool:
        futures = [pool.submit(fn, p) for p in probes]
    for fut in futures:
        e = fut.exception()
        if e is not None:
            raise e


def _versions(probes: list[_Probe]) -> None:
    """Every host's project and Locust as this checkout's."""
    describe, package = project_version()
    ours_locust = importlib.metadata.version("locust")  # not `import locust`: that monkey-patches this process
    for p in probes:
        ours: str | None
        theirs: str | None
        if describe and p.describe:
            ours, theirs = describe, p.describe
        else:
            ours, theirs = package, p.package
        if ours != theirs:
            raise p.fail(f"its project is {theirs or 'of no known version'} ({p.host.root}), this checkout's is "
                         f"{ours or 'of no known version'} ({ROOT}): the load code must be the same on both "
                         "(check out the same version there)")
        if p.facts.locust != ours_locust:
            raise p.fail(f"its Locust is {p.facts.locust}, this machine's {ours_locust}: a Locust master and its "
                         "workers must be the same version")


def _commands(exp: Experiment, host: str) -> list[Cell]:
    """The cells of a command server on `host`."""
    return [c for c in exp.cells if c.host == host and isinstance(c.kind, command.Command)]


def _programs(p: _Probe, exp: Experiment) -> None:
    """Each command server's program on its host: there, executable, and of the kind its alloc and Go keys need (the
    refusal, naming the host and the path, of a program read here when the experiment is)."""
    cells = _commands(exp, p.host.name)
    libs = [str(lib) for a in command.ALLOC_LIBS if (lib := command.alloc_library(a)) is not None]
    for exe in dict.fromkeys(c.kind.default_binary() for c in cells):
        try:
            r = remote.run(p.host, [p.host.python, "-c", PROGRAM_CHECK, exe, *libs], what=f"looking for {exe}")
            found = json.loads(r.stdout.strip().splitlines()[-1])
        except remote.RemoteError as e:
            raise HostCheckError(str(e)) from None
        except (ValueError, IndexError):
            raise p.fail(f"looking for {exe}: {p.host.python} answered {r.stdout.strip()!r}") from None
        for c in cells:
            if c.kind.default_binary() == exe:
                _judge_program(p, c, exe, found)


def _judge_program(p: _Probe, c: Cell, exe: str, found: dict[str, Any]) -> None:
    """One cell's program as its host said it is; HostCheckError naming the host, the cell and the path."""
    where = f"servers (cell {c.name!r})"
    if "error" in found:
        raise p.fail(f"{where}: command[0] = {exe!r} {found['error']} (a command server on a host runs that host's "
                     "program: an absolute path there, or a name on its PATH)")
    flags = {k: v for k, v in c.flags.items() if k in command.FLAGS}
    if not flags:
        return
    if "elf_error" in found:
        raise p.fail(f"{where}.{next(iter(flags))}: cannot inspect {found['path']} (command[0]) there: "
                     f"{found['elf_error']}")
    info = found.get("elf")
    try:
        command.check_elf(found["path"], None if info is None else (bool(info[0]), bool(info[1])), flags, where,
                          lambda lib: str(lib) in found.get("libs", []))
    except command.CommandError as e:
        raise p.fail(f"{e} (on that host)") from None


def _listener(address: str) -> tuple[socket.socket, threading.Thread]:
    """A listening socket at `address` on a free port, and the thread accepting (and closing) its connections."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((address, 0))
    except OSError as e:
        sock.close()
        raise HostCheckError(f"this machine cannot listen on {address}, its address as the load hosts see it: {e}") \
            from None
    sock.listen(16)
    sock.settimeout(0.2)

    def accept() -> None:
        while sock.fileno() != -1:
            try:
                conn, _ = sock.accept()
                conn.close()
            except TimeoutError:
                continue
            except OSError:
                return

    t = threading.Thread(target=accept, name="hostcheck-listen", daemon=True)
    t.start()
    return sock, t


def check(exp: Experiment) -> Placement:
    """Every host of the experiment checked (in parallel); the placement, or HostCheckError naming a host."""
    roles = {"server": set(exp.server_hosts), "load": set(exp.load_hosts)}
    probes = [_Probe(h, [role for role, names in roles.items() if h.name in names])
              for h in exp.hosts.values()]
    try:
        _each(probes, _Probe.start)
        _versions(probes)
        _each([p for p in probes if _commands(exp, p.host.name)], lambda p: _programs(p, exp))
        server = next((p.facts.here for p in probes if "load" in p.facts.roles), None)
        load_probes = [p for p in probes if "load" in p.facts.roles]
        if load_probes and server is None:
            raise load_probes[0].fail("its session has no SSH_CONNECTION, so this machine's address as it sees it "
                                      "is unknown")
        sock, accepting = _listener(server) if server is not None else (None, None)
        try:
            port = sock.getsockname()[1] if sock is not None else 0

            def exchange(p: _Probe) -> None:
                p.exchange((server, port) if server is not None and "load" in p.facts.roles else None)

            _each(probes, exchange)
        finally:
            if sock is not None:
                sock.close()
            if accepting is not None:
                accepting.join(timeout=1)
    finally:
        for p in probes:
            p.close()
    placement = Placement(server, [p.facts for p in probes])
    placement.text = placement.describe()
    return placement


def end_clocks(exp: Experiment, placement: Placement) -> None:
    """Each host's clock offset measured again as the check measured it, once the sweep's last run has ended (in
    parallel): into its facts (clock_end_offset_s and clock_end_uncertainty_s, or clock_end_error when it could not
    be had) and the placement's text. It never raises: a host gone by then is recorded so."""
    probes = [_Probe(exp.hosts[f.name], f.roles, f, END_TIMEOUT_S) for f in placement.hosts if f.name in exp.hosts]

    def measure(p: _Probe) -> None:
        try:
            p.end_clock()
        except Exception as e:  # whatever it was, the sweep's end is written: the reason goes with it
            said = str(e) if isinstance(e, HostCheckError) else f"{type(e).__name__}: {e}"
            p.facts.clock_end_error = said.removeprefix(f"{p.host.describe()}: ")
        finally:
            p.close()

    if probes:
        with ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="hostclock") as pool:
            list(pool.map(measure, probes))
    placement.text = placement.describe()
