"""[hosts.NAME] tables, `[load] hosts` and `[[servers]] host`: the machines, reached over SSH, that run the load's
Locust workers or a group's server (xferbench/run/remoteserver.py).

    [hosts.gen1]
    ssh = "root@10.77.0.2"          # *required*: user@address, or an alias of your ssh configuration ("lab2")
    ssh_config = "../build/lab/ssh_config"   # ssh -F FILE; relative to the experiment file's folder
    python = "/srv/xferbench/.venv/bin/python"   # default: this checkout's .venv/bin/python
    root = "/srv/xferbench"         # the checkout there; default: this checkout's path
    engine = "unix:///run/podman/podman.sock"   # its container engine's socket, for backend = "docker" servers there

    [load]
    hosts = ["gen1", "gen2"]        # `processes` Locust workers on each (default 1), the master here

    [[servers]]
    server = "xferd-c"
    host = "app"                    # this group's server on [hosts.app]; default: this machine (a command server
                                    # too, as a process there, listening at {addr}: xferbench/config/command.py)

`engine` is a socket path on the host, reached through an OpenSSH unix-socket forward over the host's own ssh
(xferbench/run/containers/forward.py): Docker's and Podman's sockets alike, and no TCP port open on the host. A
`tcp://` address is refused (an engine's API is root on its host, and a plain TCP port hands it to anyone who
reaches the port), and so is `ssh://` (the Docker SDK runs `docker system dial-stdio` there, which Podman lacks).

What is read here is only what the file says; whether SSH works, the host's Python has this project at the same
version, its clock and CPUs, and whether it reaches the servers, is xferbench/run/hostcheck.py's check, run before
any cell (`xferbench hosts check`). `python` and `root` are paths on the host, never resolved here: `python` is
absolute, a command on the host's PATH, or relative to `root`; `root` is absolute. Errors are ExperimentErrors
naming the key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from xferbench.config.files import ROOT
from xferbench.config.model import Cell, ExperimentError, Host, Load
from xferbench.config.values import _table, _unknown

HOST_KEYS = ("ssh", "ssh_config", "python", "root", "engine")
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A host that shares this machine's filesystem has these; another gets the project installed into a venv at the
# same path, or names its own (docs/EXPERIMENTS.md, "Load from other hosts").
DEFAULT_PYTHON = str(ROOT / ".venv" / "bin" / "python")
DEFAULT_ROOT = str(ROOT)


def parse_hosts(tab: dict[str, Any], folder: Path) -> dict[str, Host]:
    """[hosts]: one Host per [hosts.NAME] table, in the file's order; ssh_config resolved against `folder`."""
    out: dict[str, Host] = {}
    for name, entry in tab.items():
        where = f"hosts.{name}"
        if not HOST_NAME.fullmatch(name):
            raise ExperimentError(f"{where}: a host's name is letters, digits, '.', '_' or '-' (it names the host "
                                  "in [load] hosts and in every message)")
        out[name] = _host(name, _table(entry, where), where, folder)
    return out


def _host(name: str, tab: dict[str, Any], where: str, folder: Path) -> Host:
    _unknown(tab, HOST_KEYS, where)
    if "ssh" not in tab:
        raise ExperimentError(f'{where}.ssh: required: user@address or an ssh alias (e.g. ssh = "root@10.77.0.2")')
    ssh = tab["ssh"]
    if not isinstance(ssh, str) or not ssh or ssh.startswith("-") or any(c.isspace() for c in ssh):
        raise ExperimentError(f"{where}.ssh = {ssh!r}: expected user@address or an ssh alias, one word not starting "
                              "with '-'")
    config = tab.get("ssh_config")
    if config is not None:
        if not isinstance(config, str) or not config.strip():
            raise ExperimentError(f"{where}.ssh_config = {config!r}: expected the path of an ssh configuration file")
        p = Path(config).expanduser()
        config = os.path.normpath(p if p.is_absolute() else folder / p)
    python = tab.get("python", DEFAULT_PYTHON)
    if not isinstance(python, str) or not python.strip() or any(c.isspace() for c in python):
        raise ExperimentError(f"{where}.python = {python!r}: expected the path of the Python on that host that has "
                              "this project (default: this checkout's .venv/bin/python)")
    root = tab.get("root", DEFAULT_ROOT)
    if not isinstance(root, str) or not root.startswith("/"):
        raise ExperimentError(f"{where}.root = {root!r}: expected the absolute path of this project's checkout on "
                              "that host (default: this checkout's path)")
    return Host(name, ssh, config, python, root.rstrip("/") or "/", _engine(tab.get("engine"), where))


ENGINE_EXAMPLE = 'e.g. engine = "unix:///run/podman/podman.sock"'


def _engine(v: Any, where: str) -> str | None:
    """`engine`: "unix:///PATH", the engine's socket on the host, normalized; ExperimentError says what it takes."""
    if v is None:
        return None
    what = f"{where}.engine = {v!r}"
    if not isinstance(v, str) or not v.strip():
        raise ExperimentError(f"{what}: expected the engine's socket on that host, unix:///PATH ({ENGINE_EXAMPLE})")
    scheme = v.partition("://")[0].lower() if "://" in v else ""
    if scheme in ("tcp", "http", "https"):
        raise ExperimentError(f"{what}: an engine's TCP port is not used: its API is root on that host, and a plain "
                              f"port hands it to anyone who reaches it; give its socket, which xferbench reaches over "
                              f"this host's ssh ({ENGINE_EXAMPLE})")
    if scheme == "ssh":
        raise ExperimentError(f"{what}: the Docker SDK's ssh:// runs `docker system dial-stdio` on the host, which "
                              f"Podman lacks; give the engine's socket there, which xferbench forwards over this "
                              f"host's ssh ({ENGINE_EXAMPLE})")
    if scheme != "unix":
        raise ExperimentError(f"{what}: expected unix:///PATH, the engine's socket on that host ({ENGINE_EXAMPLE})")
    path = v[len("unix://"):]
    if not path.startswith("/"):
        raise ExperimentError(f"{what}: expected an absolute path after unix:// (three slashes: {ENGINE_EXAMPLE})")
    if any(c.isspace() or c == ":" for c in path):
        raise ExperimentError(f"{what}: a socket path without spaces or ':' (ssh -L LOCAL:REMOTE takes it as it is)")
    return "unix://" + os.path.normpath(path)


def check_value(v: Any) -> tuple[str, ...]:
    """`[load] hosts`: a list of [hosts] names, or one string of them joined by commas ("gen1,gen2": one value of
    a [servers.load] axis, where a list is the axis). ValueError says what it takes."""
    names = v.split(",") if isinstance(v, str) else v
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{v!r}: expected a list of [hosts] names, e.g. [\"gen1\", \"gen2\"]")
    out = tuple(n.strip() for n in names if n.strip())
    if len(set(out)) != len(out):
        raise ValueError(f"{v!r}: a host named twice; give `processes` for more workers on one host")
    return out


def check_cells(hosts: dict[str, Host], base: Load, cells: list[Cell], *, network: bool, backend: str,
                profile: bool = False, soak: bool = False) -> None:
    """Every [load] hosts and [[servers]] host name declared, and what a load or a server on other hosts cannot run
    with yet: the refusal names the key and the cell."""
    declared = ", ".join(hosts) or "none"
    for c in cells:
        if c.host is not None:
            _check_server_host(hosts, c, network=network, backend=backend, profile=profile, soak=soak)
    for name in base.hosts:
        if name not in hosts:
            raise ExperimentError(f"load.hosts = {list(base.hosts)!r}: no [hosts.{name}] in this experiment "
                                  f"(declared: {declared})")
    for c in cells:
        if not c.load.hosts:
            continue
        where = f"servers (cell {c.name!r}): load.hosts = {list(c.load.hosts)!r}"
        for name in c.load.hosts:
            if name not in hosts:
                raise ExperimentError(f"{where}: no [hosts.{name}] in this experiment (declared: {declared})")
        if c.kind.launcher != "registry" and c.host is None:
            raise ExperimentError(f"{where}: a {c.server} server listens where its command says, here on loopback; a "
                                  "load on other hosts drives the servers of the registry (xferd-go, xferd-c, "
                                  "bare-echo), and commands on a host of their own ([[servers]] host: their {addr} is "
                                  "its address), for now")
        if network:
            raise ExperimentError(f"{where}: [network]'s proxy runs on this machine, between a local load and the "
                                  "server; drop one of them")
        if backend != "process" and c.host is None:
            raise ExperimentError(f'{where}: servers in containers (experiment.backend = "{backend}") on this machine '
                                  "publish their ports on 127.0.0.1, out of other hosts' reach; put the server on "
                                  "a host's engine too ([[servers]] host, [hosts.NAME] engine)")
        for key in ("locustfile", "proto", "protoset", "import_path"):
            if getattr(c.load, key):
                raise ExperimentError(f"{where}: load.{key} is a file of this machine, which the workers on other "
                                      "hosts would not read; drop one of them")
        if c.load.data and c.load.data.startswith("@"):
            raise ExperimentError(f"{where}: load.data = '@FILE' is a file of this machine, which the workers on "
                                  "other hosts would not read; give the request inline")


def _check_server_host(hosts: dict[str, Host], c: Cell, *, network: bool, backend: str, profile: bool,
                       soak: bool) -> None:
    """`[[servers]] host`: a declared host, and a server the remote runner can start and measure there (a registry
    server or a command: as a process, measured by the /proc tree its watch reads on the host; a registry server in
    a container, on the host's `engine`, measured by that engine's statistics of the container). What a command
    there cannot have (its folders, a relative program) is xferbench/config/command.py's refusal."""
    where = f"servers (cell {c.name!r}): host = {c.host!r}"
    if c.host not in hosts:
        raise ExperimentError(f"{where}: no [hosts.{c.host}] in this experiment (declared: {', '.join(hosts) or 'none'})")
    if c.kind.launcher != "registry" and backend != "process":
        raise ExperimentError(f'{where}: a {c.server} server on another host runs there as a process (experiment.'
                              f'backend = "process"), not in a container on its engine, for now')
    if backend != "process" and hosts[c.host].engine is None:
        raise ExperimentError(f'{where}: a server in a container (experiment.backend = "{backend}") on another host '
                              f"runs on that host's engine, and [hosts.{c.host}] names none ({ENGINE_EXAMPLE}, its "
                              "socket there)")
    if network:
        raise ExperimentError(f"{where}: [network]'s proxy runs on this machine, in front of a local server; drop "
                              "one of them")
    if profile:
        raise ExperimentError(f"{where}: experiment.profile samples a server on this machine only, for now")
    if soak:
        raise ExperimentError(f"{where}: [soak] reads a server on this machine only, for now")
