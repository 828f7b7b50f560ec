"""[load] keys that point the load at the user's own target: any gRPC method, or a weighted mix of them (`call`,
`data`, `proto`, `import_path`, `protoset`: loadgen's CallUser) or the user's own Locust users (`locustfile`), and
`options` (a user locustfile's own command-line options) and `processes` (Locust distributed over several generator
processes).

Read by the schema (xferbench/config/load.py): paths are made absolute against the experiment file's folder
before any value is checked (loadgen's own parsers test that the files exist, and the generator runs in
the repository's root), then `check` refuses, one line each, the combinations no generator can run. What
each needs of the driver (`call`, `locustfile` and `processes` > 1: Locust) is read from the driver's entry in
xferbench/config/drivers.py, checked before these. Errors are ValueErrors; the schema adds the TOML path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

import loadgen
from loadgen._call_options import parse_calls, templates

CALL_KEYS = ("call", "data", "proto", "import_path", "protoset")  # loadgen's --xfer-<key> options
OWN_KEYS = ("locustfile", "options", "processes", "paced")  # the runner's: not loadgen options
MAX_PROCESSES = 64
# A locustfile option's name as [load] options gives it: a long option's, without its dashes ("my-flag" → --my-flag).
OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]+")
# The options the runner itself gives Locust (generators.userload_argv), and loadgen's: a user's would clash.
RUNNER_OPTIONS = ("host", "users", "spawn-rate", "run-time", "headless", "locustfile", "processes", "csv",
                  "only-summary", "loglevel", "master-port", "master-bind-port")

# The host a user locustfile is given (`--host`): a URL, so that Locust's HttpUser takes it as it is and any
# other user reads the address with urllib.parse.urlsplit(self.host).hostname / .port.
LOCUSTFILE_HOST = "http://{addr}"


class UserLoad(Protocol):
    """The fields of config.model.Load this module reads (config.load imports this module, not the reverse)."""

    @property
    def call(self) -> str | None: ...
    @property
    def data(self) -> str | None: ...
    @property
    def proto(self) -> str | None: ...
    @property
    def import_path(self) -> str | None: ...
    @property
    def protoset(self) -> str | None: ...
    @property
    def locustfile(self) -> str | None: ...
    @property
    def options(self) -> dict[str, str | bool] | None: ...
    @property
    def processes(self) -> int: ...
    @property
    def transport(self) -> str: ...
    @property
    def rate(self) -> str | None: ...
    @property
    def profile(self) -> str: ...
    @property
    def mode(self) -> str | None: ...
    @property
    def steps(self) -> str | None: ...
    @property
    def paced(self) -> bool: ...


def _absolute(text: str, base: Path) -> str:
    p = Path(text).expanduser()
    return str(p if p.is_absolute() else base / p)


def absolute_paths(tab: dict[str, Any], base: Path) -> dict[str, Any]:
    """A [load] table (or a group's load overrides) with its file keys made absolute against `base`, the
    experiment file's folder: data's @FILE, proto, protoset, locustfile and every import_path folder (a TOML
    list becomes loadgen's DIR,DIR text). Values of the wrong type are left for the checks to refuse."""
    out = dict(tab)

    def each(key: str, fix: Any) -> None:
        if key in out:  # a list in a group's load is an axis: each value alike
            v = out[key]
            out[key] = [fix(x) for x in v] if isinstance(v, list) and key != "import_path" else fix(v)

    def data(v: Any) -> Any:
        return "@" + _absolute(v[1:], base) if isinstance(v, str) and v.startswith("@") else v

    def path(v: Any) -> Any:
        return _absolute(v, base) if isinstance(v, str) and v.strip() else v

    def folders(v: Any) -> Any:
        items = v if isinstance(v, list) else v.split(",") if isinstance(v, str) else None
        if items is None or not all(isinstance(x, str) for x in items):
            return v
        return ",".join(_absolute(x.strip(), base) for x in items if x.strip())

    each("data", data)
    for key in ("proto", "protoset", "locustfile"):
        each(key, path)
    each("import_path", folders)
    return out


def check_value(key: str, v: Any) -> Any:
    """One of OWN_KEYS, checked alone; ValueError says what it takes."""
    if key == "locustfile":
        if not isinstance(v, str) or not v.endswith(".py"):
            raise ValueError(f"{v!r}: expected the path of a Python locustfile (.py), relative to the experiment file")
        if not Path(v).is_file():
            raise ValueError(f"{v!r}: no such file")
        return v
    if key == "options":
        return _check_options(v)
    if key == "paced":
        if not isinstance(v, bool):
            raise ValueError(f"{v!r}: expected true (your locustfile's users hold a fixed rate) or false")
        return v
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_PROCESSES:
        raise ValueError(f"{v!r}: expected a whole number of Locust processes, 1..{MAX_PROCESSES}")
    return v


def _check_options(v: Any) -> dict[str, str | bool]:
    """[load] options = { "my-flag" = "value", "verbose" = true }: each a long option of the user's locustfile."""
    if not isinstance(v, dict):
        raise ValueError(f'{v!r}: expected a table of your locustfile\'s options, e.g. {{ "my-flag" = "value" }}')
    out: dict[str, str | bool] = {}
    for name, value in v.items():
        if not OPTION_NAME.fullmatch(name):
            raise ValueError(f"{v!r}: {name!r} is not a plain long option name: give it without its dashes, e.g. "
                             '"my-flag" for --my-flag (letters, digits, - and _)')
        if name in RUNNER_OPTIONS or name.startswith("xfer-"):
            raise ValueError(f"{v!r}: --{name} is the runner's (it sets it from the other [load] keys)")
        if isinstance(value, bool):
            if value:
                out[name] = True  # a switch: --name alone; false leaves it out
        elif isinstance(value, str | int | float):
            out[name] = str(value)
        else:
            raise ValueError(f"{v!r}: {name!r} = {value!r}: expected a string, a number or true")
    return out


def option_args(options: dict[str, str | bool] | None) -> list[str]:
    """[load] options on Locust's command line: "--name value", or "--name" alone for true."""
    args: list[str] = []
    for name, value in (options or {}).items():
        args += [f"--{name}"] if value is True else [f"--{name}", str(value)]
    return args


def check(load: UserLoad) -> None:
    """The combinations of a cell's load no generator can run (what the driver lacks is drivers.check's);
    ValueError starts with the key at fault."""
    if load.call and load.transport != "grpc":
        raise ValueError(
            f'call = {load.call!r}: calling a gRPC method needs transport = "grpc" (this cell\'s is {load.transport!r})'
        )
    for key in CALL_KEYS[1:]:
        if getattr(load, key) and not load.call:
            raise ValueError(f"{key}: belongs to load.call (the gRPC method it describes); set call or drop {key}")
    if load.call:
        _check_call_data(load.call, load.data)
    if load.locustfile:
        _check_locustfile(load)
    elif load.options:
        raise ValueError(
            f"options = {load.options!r}: are passed to your own locustfile; loadgen's users take [load] keys instead "
            "(the list: python -m loadgen)"
        )
    elif load.paced:
        raise ValueError(
            "paced = true: says a user locustfile holds its own fixed rate; loadgen's users take load.rate for that"
        )


def _check_call_data(call: str, data: str | None) -> None:
    """A mix of methods (call = "A:3,B:1") takes data keyed by each method: checked here as Locust checks it at
    start (loadgen._call_options.templates), so a key missing or extra fails when the experiment is read. Each
    value alone was checked by loadgen's own parser already."""
    try:
        templates(parse_calls(call), loadgen.option("data").parse(data or ""))
    except ValueError as e:
        said = f"data = {data!r}" if data else "data (not set)"
        raise ValueError(f"{said}: {e}") from None


def _check_locustfile(load: UserLoad) -> None:
    f = load.locustfile
    if load.call:
        raise ValueError(f"locustfile = {f!r}: runs your own users; load.call runs loadgen's, drop one of them")
    if load.rate or load.mode in ("open", "capacity"):
        raise ValueError(
            f"locustfile = {f!r}: your users set their own pace (their wait_time), so load.rate and load.mode are "
            "loadgen's and do not apply: drop load.rate / load.mode, and set paced = true if your users hold a fixed "
            "rate (constant_throughput)"
        )
    if load.profile != "steady" or load.steps:
        raise ValueError(f'locustfile = {f!r}: load profiles are loadgen\'s shape; keep profile = "steady"')


def absolute_document(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """The decoded experiment with absolute_paths applied to [load] and every [servers.load]."""
    out = dict(data)
    if isinstance(out.get("load"), dict):
        out["load"] = absolute_paths(out["load"], base)
    if isinstance(out.get("servers"), list):
        out["servers"] = [
            {**g, "load": absolute_paths(g["load"], base)} if isinstance(g, dict) and isinstance(g.get("load"), dict) else g
            for g in out["servers"]
        ]
    return out
