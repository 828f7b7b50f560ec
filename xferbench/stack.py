"""`xferbench stack up|down|status`: the observability stack without Docker.

Runs a local Prometheus binary (Debian's `prometheus` package, or $PROMETHEUS_BIN) with the repository's
own `deploy/prometheus/prometheus.yml` and recording rules, rewritten for local processes:

- compose service names become local addresses (`xferd-go:9101` -> `127.0.0.1:9101`, ...; override any of
  them with `--target SERVICE=HOST:PORT`, repeatable; `--target SERVICE=` drops a service);
- DNS discovery of Locust processes becomes static targets (by default the master's `127.0.0.1:9646`);
- file discovery reads `<dir>/targets/`, where a runner (or a person) drops JSON target files
  (`write_targets`) to have more processes scraped while the stack runs;
- intervals can be shortened (`--scrape-interval 1s`).

State lives in `build/stack/` (or `--dir`): the rewritten config, the TSDB, a log and a pid file. Prometheus
runs with `--web.enable-lifecycle`; `up` returns once `/-/ready` answers, `down` asks `/-/quit` and waits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
PROM_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
DEFAULT_DIR = ROOT / "build" / "stack"
DEFAULT_LISTEN = "127.0.0.1:9090"

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.1

# Where each compose service lives when everything runs on this machine (docs/DESIGN.md's default ports).
# An empty list: not scraped unless given with --target (Locust workers pick their own ports).
LOCAL_SERVICES: dict[str, list[str]] = {
    "xferd-go": ["127.0.0.1:9101"],
    "xferd-c": ["127.0.0.1:9102"],
    "locust-master": ["127.0.0.1:9646"],
    "locust-worker": [],
}
SELF = "localhost"  # the config's name for Prometheus itself


class StackError(RuntimeError):
    """A stack operation that cannot go on; the message says why."""


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


def write_targets(targets_dir: Path, name: str, targets: Sequence[str], labels: Mapping[str, str]) -> Path:
    """Writes one file-discovery target group; Prometheus picks it up within a second or two.

    `name` must start with the job it belongs to (`xferd-...` or `locust-...`), as the config's patterns do;
    labels should carry `server` for servers. The write is atomic (rename), so a half file is never read.
    """
    if not (name.startswith("xferd-") or name.startswith("locust-")):
        raise StackError(f"target file {name!r} must start with 'xferd-' or 'locust-'")
    targets_dir.mkdir(parents=True, exist_ok=True)
    path = targets_dir / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps([{"targets": list(targets), "labels": dict(labels)}], indent=2) + "\n")
    tmp.replace(path)
    return path


def remove_targets(targets_dir: Path, name: str) -> None:
    (targets_dir / f"{name}.json").unlink(missing_ok=True)


def stack_dir() -> Path:
    """The local stack's state folder: $XFERBENCH_STACK_DIR, else build/stack."""
    return Path(os.environ.get("XFERBENCH_STACK_DIR") or DEFAULT_DIR)


def register_target(addr: str, labels: Mapping[str, str]) -> Callable[[], None]:
    """Has the running local stack scrape a server at `addr` (the runner's `--prometheus` hook).

    Writes `xferd-<addr>.json` into the stack's targets folder and returns the function that removes it.
    """
    d = stack_dir()
    state = _read_state(d)
    if state is None or not _pid_alive(state[0]):
        raise StackError(
            f"no local stack is up in {d}: run `xferbench stack up` first "
            "(or give the runner --prometheus-sd DIR for another Prometheus)"
        )
    name = "xferd-" + addr.replace(":", "_").replace("/", "_")
    write_targets(d / "targets", name, [addr], labels)
    return lambda: remove_targets(d / "targets", name)


# ---------------------------------------------------------------------------------------------- process


def prometheus_binary() -> str:
    found = os.environ.get("PROMETHEUS_BIN") or shutil.which("prometheus")
    if not found:
        raise StackError("no prometheus binary: install Debian's `prometheus` package or set PROMETHEUS_BIN")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_ready(
    url: str,
    proc: subprocess.Popen[bytes] | None = None,
    timeout: float = READY_TIMEOUT_S,
    log: Path | None = None,
) -> None:
    """Polls `url`/-/ready until it answers 200; fails early if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise StackError(f"prometheus exited with {proc.returncode} before ready\n{tail}")
        with contextlib.suppress(OSError):
            if _get(f"{url}/-/ready", timeout=1.0)[0] == 200:
                return
        time.sleep(POLL_INTERVAL_S)
    raise StackError(f"prometheus at {url} not ready after {timeout:.0f}s")


@dataclass
class Prometheus:
    proc: subprocess.Popen[bytes]
    url: str
    config: Path
    log: Path

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def start_prometheus(
    config: Path, data_dir: Path, listen: str, log: Path, *, detach: bool = False, retention: str = "2d"
) -> Prometheus:
    """Starts Prometheus on `config` and returns once it is ready."""
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [
        prometheus_binary(),
        f"--config.file={config}",
        f"--storage.tsdb.path={data_dir}",
        f"--storage.tsdb.retention.time={retention}",
        f"--web.listen-address={listen}",
        "--web.enable-lifecycle",
    ]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=detach
        )
    prom = Prometheus(proc, f"http://{listen}", config, log)
    try:
        wait_ready(prom.url, proc, log=log)
    except BaseException:
        prom.stop()
        raise
    return prom


@contextlib.contextmanager
def running_prometheus(
    workdir: Path, *, services: Mapping[str, Sequence[str]] | None = None, scrape_interval: str | None = None
) -> Iterator[Prometheus]:
    """A throw-away Prometheus on a free loopback port with the repository's config (for tests)."""
    (workdir / "targets").mkdir(parents=True, exist_ok=True)  # must exist before start: Prometheus watches it
    listen = f"127.0.0.1:{free_port()}"
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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    if state and _pid_alive(state[0]):
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
    check = (
        subprocess.run(
            [shutil.which("promtool") or "promtool", "check", "config", str(config)],
            capture_output=True,
            text=True,
        )
        if shutil.which("promtool")
        else None
    )
    if check is not None and check.returncode != 0:
        raise StackError(f"promtool rejects {config}:\n{check.stdout}{check.stderr}")
    prom = start_prometheus(config, d / "data", a.listen, d / "prometheus.log", detach=True, retention=a.retention)
    (d / "prometheus.pid").write_text(f"{prom.proc.pid}\n")
    (d / "prometheus.url").write_text(prom.url + "\n")
    print(f"prometheus ready at {prom.url} (pid {prom.proc.pid})")
    print(f"  config  {config}")
    print(f"  targets {d / 'targets'}  (drop xferd-*.json / locust-*.json here to scrape more)")
    print(f"  log     {d / 'prometheus.log'}")
    print("  stop with `xferbench stack down`")
    return 0


def cmd_down(a: argparse.Namespace) -> int:
    d: Path = a.dir
    state = _read_state(d)
    if state is None or not _pid_alive(state[0]):
        print("stack is not up")
        (d / "prometheus.pid").unlink(missing_ok=True)
        return 0
    pid, url = state
    try:
        urllib.request.urlopen(urllib.request.Request(f"{url}/-/quit", method="POST"), timeout=2.0).close()
    except OSError:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _pid_alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(POLL_INTERVAL_S)
    if _pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    (d / "prometheus.pid").unlink(missing_ok=True)
    print(f"prometheus (pid {pid}) stopped; data kept in {d / 'data'}")
    return 0


def cmd_status(a: argparse.Namespace) -> int:
    state = _read_state(a.dir)
    if state is None or not _pid_alive(state[0]):
        print("stack is not up")
        return 1
    pid, url = state
    status, body = _get(f"{url}/api/v1/targets?state=active")
    print(f"prometheus pid {pid} at {url}")
    if status == 200:
        for t in json.loads(body)["data"]["activeTargets"]:
            print(f"  {t['labels'].get('job', '?'):<10} {t['scrapeUrl']:<40} {t['health']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="state folder (default build/stack)")
    p = argparse.ArgumentParser(prog="xferbench stack", description=(__doc__ or "").split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", parents=[common], help="start a local Prometheus with the repository's config")
    up.add_argument("--listen", default=DEFAULT_LISTEN, help="Prometheus address (default %(default)s)")
    up.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="SERVICE=HOST:PORT",
        help="where a compose service runs locally (repeatable; SERVICE= drops it)",
    )
    up.add_argument("--scrape-interval", default=None, help="e.g. 1s (default: the config's)")
    up.add_argument("--retention", default="2d", help="TSDB retention (default %(default)s)")
    up.set_defaults(func=cmd_up)
    sub.add_parser("down", parents=[common], help="stop it (data is kept)").set_defaults(func=cmd_down)
    st = sub.add_parser("status", parents=[common], help="pid, URL and scrape targets")
    st.set_defaults(func=cmd_status)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        return int(a.func(a))
    except StackError as e:
        print(f"xferbench stack: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
