"""`xferbench stack up|down|status`: the observability stack without Docker; `xferbench stack config`: the servers
of its config from the server registry.

Runs a local Prometheus binary (Debian's `prometheus` package, or $PROMETHEUS_BIN) with the repository's
own `deploy/prometheus/prometheus.yml` and recording rules, rewritten for local processes:

- compose service names become local addresses (`xferd-go:9101` -> `127.0.0.1:9101`, ...; override any of
  them with `--target SERVICE=HOST:PORT`, repeatable; `--target SERVICE=` drops a service);
- DNS discovery of Locust processes becomes static targets (by default the master's `127.0.0.1:9646`);
- file discovery reads `<dir>/targets/`, where `xferbench run --prometheus` (or a person) drops JSON target
  files (xferbench/measure/targets.py) to have more processes scraped while the stack runs;
- intervals can be shortened (`--scrape-interval 1s`).

State lives in `build/stack/` (or `--dir`, or $XFERBENCH_STACK_DIR): the rewritten config, the TSDB, a log
and a pid file. Prometheus runs with `--web.enable-lifecycle`; `up` returns once `/-/ready` answers and prints
UI links that work on the installed version; `status` waits (bounded) for every target's first scrape;
`down` asks `/-/quit` and waits.

The config's servers are the registry's (xferbench/config/servers.py): `config` writes the lines between its
GEN_BEGIN and GEN_END comments, one target per kind with a metrics endpoint, and `config --check` (and
tests/deploy) fails while the committed file differs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from py_client.durations import parse_duration
from xferbench.config import servers
from xferbench.config.files import ROOT
from xferbench.measure import procfs
from xferbench.measure.targets import FileSDRegistry
from xferbench.run import process

# The launcher's names the stack's callers reach through it (export, the tests): one way to start Prometheus.
from xferbench.tools.prometheus import POLL_INTERVAL_S, STOP_TIMEOUT_S, ui_links, wait_first_scrapes
from xferbench.tools.prometheus import Prometheus as Prometheus
from xferbench.tools.prometheus import StackError as StackError
from xferbench.tools.prometheus import prometheus_binary as prometheus_binary
from xferbench.tools.prometheus import start_prometheus as start_prometheus

DEPLOY = ROOT / "deploy"
PROM_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
DEFAULT_DIR = ROOT / "build" / "stack"
DEFAULT_LISTEN = "127.0.0.1:9090"

STATUS_WAIT_S = 15.0  # `stack status`: how long to wait for the targets' first scrapes (3 of the config's 5s)

# Where each compose service lives when everything runs on this machine (docs/DESIGN.md's default ports):
# a server's compose service is its registry name, scraped on its default metrics port (a kind without a
# metrics endpoint has nothing to scrape and is not a service of the stack).
# An empty list: not scraped unless given with --target (Locust workers pick their own ports).
LOCAL_SERVICES: dict[str, list[str]] = {
    **{s.name: [f"127.0.0.1:{s.ports[s.metrics_key]}"] for s in servers.SERVERS.values() if s.metrics},
    "locust-master": ["127.0.0.1:9646"],
    "locust-worker": [],
}
SELF = "localhost"  # the config's name for Prometheus itself

# prometheus.yml's servers are the registry's: the lines between these two are written by `xferbench stack config`
# (one target per kind with a metrics endpoint, its compose service at its default metrics port, labelled with
# its name), and tests/deploy fails while the committed file differs from what the registry writes.
GEN_BEGIN = "# BEGIN servers: written from xferbench/config/servers.py by `xferbench stack config`; do not edit"
GEN_END = "# END servers"


def registry_targets(indent: str) -> list[str]:
    """The static target groups of the servers with metrics, as prometheus.yml's lines."""
    lines = []
    for s in servers.SERVERS.values():
        if s.metrics:
            lines += [f'{indent}- targets: ["{s.name}:{s.ports[s.metrics_key]}"]', f"{indent}  labels:",
                      f"{indent}    server: {s.name}"]
    return lines


def with_registry_targets(text: str, src: Path = PROM_CONFIG) -> str:
    """`text` (prometheus.yml) with the lines between GEN_BEGIN and GEN_END written from the registry."""
    lines = text.splitlines()
    begins = [i for i, line in enumerate(lines) if line.strip() == GEN_BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == GEN_END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise StackError(f"{src}: want one {GEN_BEGIN!r} line, then one {GEN_END!r} line")
    b, e = begins[0], ends[0]
    indent = lines[b][: len(lines[b]) - len(lines[b].lstrip())]
    return "\n".join([*lines[: b + 1], *registry_targets(indent), *lines[e:]]) + "\n"


# ---------------------------------------------------------------------------------------------- config


def _split_hostport(target: str) -> tuple[str, str]:
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise StackError(f"target {target!r} is not HOST:PORT")
    return host, port


def local_config(
    *,
    services: Mapping[str, Sequence[str]] | None = None,
    prometheus_addr: str = DEFAULT_LISTEN,
    targets_dir: Path,
    scrape_interval: str | None = None,
    src: Path = PROM_CONFIG,
) -> dict[str, Any]:
    """The repository's Prometheus config with every compose address rewritten to a local one.

    `services` maps a compose service name to the addresses that replace it (merged over
    LOCAL_SERVICES); a name the config uses but neither knows is an error, so the rewrite never guesses.
    """
    hosts = {**LOCAL_SERVICES, **{k: list(v) for k, v in (services or {}).items()}}
    hosts[SELF] = [prometheus_addr]
    cfg: dict[str, Any] = yaml.safe_load(src.read_text())
    base = src.parent

    def resolve(host: str) -> list[str]:
        if host not in hosts:
            raise StackError(f"{src}: no local address for service {host!r}; pass --target {host}=HOST:PORT")
        return hosts[host]

    glob = cfg.setdefault("global", {})
    if scrape_interval:
        glob["scrape_interval"] = scrape_interval
        glob["evaluation_interval"] = scrape_interval
        glob["scrape_timeout"] = scrape_interval
    cfg["rule_files"] = [str((base / p).resolve()) for p in cfg.get("rule_files", [])]

    for job in cfg.get("scrape_configs", []):
        groups: list[dict[str, Any]] = []
        for group in job.get("static_configs", []):
            addrs = [a for t in group.get("targets", []) for a in resolve(_split_hostport(t)[0])]
            if addrs:
                groups.append({**group, "targets": addrs})
        for dns in job.pop("dns_sd_configs", []):
            addrs = [a for name in dns.get("names", []) for a in resolve(name)]
            if addrs:
                groups.append({"targets": addrs})
        if groups:
            job["static_configs"] = groups
        else:
            job.pop("static_configs", None)
        for fsd in job.get("file_sd_configs", []):
            fsd["files"] = [str(targets_dir / Path(p).name) for p in fsd.get("files", [])]
        if not job.get("static_configs") and not job.get("file_sd_configs"):
            job["static_configs"] = [{"targets": []}]
    return cfg


def stack_dir() -> Path:
    """The local stack's state folder: $XFERBENCH_STACK_DIR, else build/stack."""
    return Path(os.environ.get("XFERBENCH_STACK_DIR") or DEFAULT_DIR)


def registry(d: Path | None = None) -> FileSDRegistry:
    """Where `xferbench run --prometheus` registers its servers and Locusts: the running local stack's
    targets folder. Raises StackError, before any server starts, when no stack is up there."""
    d = d or stack_dir()
    state = _read_state(d)
    if state is None or not procfs.pid_alive(state[0]):
        raise StackError(
            f"no local stack is up in {d}: run `xferbench stack up` first "
            "(or give --prometheus-sd DIR, a folder of file-discovery targets that Prometheus watches)"
        )
    return FileSDRegistry(d / "targets")


@contextlib.contextmanager
def running_prometheus(
    workdir: Path, *, services: Mapping[str, Sequence[str]] | None = None, scrape_interval: str | None = None
) -> Iterator[Prometheus]:
    """A throw-away Prometheus on a free loopback port with the repository's config (for tests)."""
    (workdir / "targets").mkdir(parents=True, exist_ok=True)  # must exist before start: Prometheus watches it
    listen = f"127.0.0.1:{process.free_port()}"
    cfg = local_config(
        services=services,
        prometheus_addr=listen,
        targets_dir=workdir / "targets",
        scrape_interval=scrape_interval,
    )
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    prom = start_prometheus(config, workdir / "data", listen, workdir / "prometheus.log")
    try:
        yield prom
    finally:
        prom.stop()


# ---------------------------------------------------------------------------------------------- CLI


def _read_state(d: Path) -> tuple[int, str] | None:
    pidfile, urlfile = d / "prometheus.pid", d / "prometheus.url"
    if not pidfile.exists():
        return None
    pid = int(pidfile.read_text().strip())
    return pid, (urlfile.read_text().strip() if urlfile.exists() else f"http://{DEFAULT_LISTEN}")


def _parse_targets(items: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, addr = item.partition("=")
        if not sep or not name:
            raise StackError(f"--target {item!r}: expected SERVICE=HOST:PORT (or SERVICE= to drop it)")
        out.setdefault(name, [])
        if addr:
            _split_hostport(addr)
            out[name].append(addr)
    return out


def cmd_up(a: argparse.Namespace) -> int:
    d: Path = a.dir
    state = _read_state(d)
    if state and procfs.pid_alive(state[0]):
        print(f"stack already up: prometheus pid {state[0]} at {state[1]}")
        return 0
    d.mkdir(parents=True, exist_ok=True)
    cfg = local_config(
        services=_parse_targets(a.target),
        prometheus_addr=a.listen,
        targets_dir=d / "targets",
        scrape_interval=a.scrape_interval,
    )
    (d / "targets").mkdir(exist_ok=True)
    config = d / "prometheus.yml"
    config.write_text(
        "# written by `xferbench stack up` from deploy/prometheus/prometheus.yml\n" + yaml.safe_dump(cfg, sort_keys=False)
    )
    _promtool_check(config)
    prom = start_prometheus(config, d / "data", a.listen, d / "prometheus.log", detach=True, retention=a.retention)
    (d / "prometheus.pid").write_text(f"{prom.proc.pid}\n")
    (d / "prometheus.url").write_text(prom.url + "\n")
    print(f"prometheus ready at {prom.url} (pid {prom.proc.pid})")
    _print_links(prom.url)
    print(f"  config  {config}")
    print(f"  targets {d / 'targets'}  (drop xferd-*.json / locust-*.json here to scrape more)")
    print(f"  log     {d / 'prometheus.log'}")
    print("  stop with `xferbench stack down`")
    return 0


def _promtool_check(config: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        return
    check = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True)
    if check.returncode != 0:
        raise StackError(f"promtool rejects {config}:\n{check.stdout}{check.stderr}")


def _print_links(url: str) -> None:
    for page, link in ui_links(url).items():
        print(f"  {page:<7} {link}")


def _running(pid: int) -> bool:
    """Alive and not a zombie. Once `stack up` has exited, its Prometheus is init's child: after /-/quit it is
    a zombie until init reaps it, which can take seconds (or never happen, under a PID 1 that does not reap)."""
    return procfs.running(pid)


def cmd_down(a: argparse.Namespace) -> int:
    d: Path = a.dir
    state = _read_state(d)
    if state is None or not procfs.pid_alive(state[0]):
        print("stack is not up")
        (d / "prometheus.pid").unlink(missing_ok=True)
        return 0
    pid, url = state
    try:
        urllib.request.urlopen(urllib.request.Request(f"{url}/-/quit", method="POST"), timeout=2.0).close()
    except OSError:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaps it when it is this process' child
        if not _running(pid):
            break
        time.sleep(POLL_INTERVAL_S)
    if _running(pid):
        os.kill(pid, signal.SIGKILL)
    (d / "prometheus.pid").unlink(missing_ok=True)
    print(f"prometheus (pid {pid}) stopped; data kept in {d / 'data'}")
    return 0


def cmd_status(a: argparse.Namespace) -> int:
    state = _read_state(a.dir)
    if state is None or not procfs.pid_alive(state[0]):
        print("stack is not up")
        return 1
    pid, url = state
    print(f"prometheus pid {pid} at {url}")
    _print_links(url)
    found = wait_first_scrapes(url, a.wait)
    if not found:
        print(f"  no targets discovered within {a.wait:g}s")
    for t in found:
        health = t["health"] if t["health"] != "unknown" else f"unknown (not scraped within {a.wait:g}s)"
        error = f"  {t['lastError']}" if t.get("lastError") else ""
        print(f"  {t['labels'].get('job', '?'):<10} {t['scrapeUrl']:<40} {health}{error}")
    return 0


def cmd_config(a: argparse.Namespace) -> int:
    """Writes prometheus.yml's servers from the registry; with --check only says whether they differ."""
    text = PROM_CONFIG.read_text()
    new = with_registry_targets(text)
    rel = PROM_CONFIG.relative_to(ROOT)
    if new == text:
        print(f"{rel}: its servers are the registry's")
        return 0
    if a.check:
        print(f"{rel}: its servers differ from xferbench/config/servers.py: run `xferbench stack config`", file=sys.stderr)
        return 1
    PROM_CONFIG.write_text(new)
    print(f"{rel}: servers written from xferbench/config/servers.py")
    return 0


def _seconds(text: str) -> float:
    """A duration in the one grammar (py_client/durations.py): 15, 15s, 1m30s."""
    if text.startswith("-"):
        raise argparse.ArgumentTypeError(f"{text!r}: want a duration of 0 seconds or more")
    try:
        v = parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want seconds, such as 15 or 15s (or 1m30s, 500ms)") from None
    return v


def _run(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A subcommand whose StackError is a one-line message and exit status 1."""

    def run(a: argparse.Namespace) -> int:
        try:
            return fn(a)
        except StackError as e:
            print(f"xferbench stack: error: {e}", file=sys.stderr)
            return 1

    return run


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`xferbench stack up|down|status|config`, a subcommand of the one `xferbench` parser (xferbench/cli.py)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=stack_dir(),
                        help="state folder (default: $XFERBENCH_STACK_DIR, else build/stack)")
    p = sub.add_parser("stack", help="a local Prometheus with the repository's config (no Docker)",
                       description=(__doc__ or "").split("\n\n")[0])
    stack_sub = p.add_subparsers(dest="stack_cmd", required=True, metavar="{up,down,status,config}")
    up = stack_sub.add_parser("up", parents=[common], help="start a local Prometheus with the repository's config")
    up.add_argument("--listen", default=DEFAULT_LISTEN, help="Prometheus address (default %(default)s)")
    up.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="SERVICE=HOST:PORT",
        help="where a compose service runs locally (repeatable; SERVICE= drops it)",
    )
    up.add_argument("--scrape-interval", default=None, help="e.g. 1s (default: the config's, 5s)")
    up.add_argument("--retention", default="2d", help="TSDB retention (default %(default)s)")
    up.set_defaults(fn=_run(cmd_up))
    stack_sub.add_parser("down", parents=[common], help="stop it (data is kept)").set_defaults(fn=_run(cmd_down))
    st = stack_sub.add_parser("status", parents=[common], help="pid, UI links, and every target's health")
    st.add_argument("--wait", type=_seconds, default=STATUS_WAIT_S, metavar="SECONDS",
                    help="wait up to this long for every target's first scrape (default %(default)gs)")
    st.set_defaults(fn=_run(cmd_status))
    cfg = stack_sub.add_parser("config", help="write deploy/prometheus/prometheus.yml's servers from the server registry")
    cfg.add_argument("--check", action="store_true", help="write nothing: exit 1 when they differ from the registry's")
    cfg.set_defaults(fn=_run(cmd_config))
