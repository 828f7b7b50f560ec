"""A Prometheus process on this machine: found ($PROMETHEUS_BIN or Debian's `prometheus` package), started on a
config with the lifecycle API, ready once `/-/ready` answers, stopped; and the parts of its HTTP API the stack
reads (links to its UI, its targets). `xferbench stack` (xferbench/tools/stack.py) writes the config and keeps the
state; `xferbench export` starts one on a backfilled TSDB."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xferbench.run import process

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.1


class StackError(RuntimeError):
    """A stack operation that cannot go on; the message says why."""


def prometheus_binary() -> str:
    found = os.environ.get("PROMETHEUS_BIN") or shutil.which("prometheus")
    if not found:
        raise StackError("no prometheus binary: install Debian's `prometheus` package or set PROMETHEUS_BIN")
    return found


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _answers(url: str) -> bool:
    try:
        return _get(url, timeout=1.0)[0] == 200
    except OSError:
        return False


@dataclass
class Prometheus:
    proc: subprocess.Popen[bytes]
    url: str
    config: Path
    log: Path

    def stop(self) -> int:
        return process.stop(self.proc, grace_s=STOP_TIMEOUT_S)


def start_prometheus(
    config: Path, data_dir: Path, listen: str, log: Path, *, detach: bool = False, retention: str = "2d"
) -> Prometheus:
    """Starts Prometheus on `config` and returns once `/-/ready` answers. `detach`: it outlives this
    process (`stack up`; `stack down` stops it by its pid file)."""
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
        proc = process.spawn(args, stdout=out, stderr=subprocess.STDOUT, detach=detach)
    prom = Prometheus(proc, f"http://{listen}", config, log)

    def tail() -> list[str]:
        return log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []

    try:
        process.wait_until(lambda: _answers(f"{prom.url}/-/ready"), proc, f"prometheus at {prom.url}",
                           READY_TIMEOUT_S, tail)
    except process.ServerStartError as e:
        prom.stop()
        raise StackError("\n".join([str(e), *e.tail])) from None
    except BaseException:
        prom.stop()
        raise
    return prom


# ---------------------------------------------------------------------------------------------- the web UI


def ui_links(url: str) -> dict[str, str]:
    """Links to the pages a user wants (targets, rules, graph) that work on the Prometheus at `url`.

    Debian's builds (version `2.42.0+ds`, what `stack up` runs) ship only the classic UI, under
    `/classic/`, and answer 404 at `/targets`; upstream builds serve their UI at the root. The version from
    /api/v1/status/buildinfo gives the first guess, and one request confirms it, so a packaging this does
    not know still gets working links.
    """
    status, body = _get(f"{url}/api/v1/status/buildinfo")
    version = str(json.loads(body)["data"].get("version", "")) if status == 200 else ""
    guess, other = ("/classic", "") if "+ds" in version else ("", "/classic")
    prefix = guess if _answers(f"{url}{guess}/targets") or not _answers(f"{url}{other}/targets") else other
    return {page: f"{url}{prefix}/{page}" for page in ("targets", "rules", "graph")}


# ---------------------------------------------------------------------------------------------- targets


def targets(url: str) -> list[dict[str, Any]]:
    """Prometheus' active targets; [] when it does not answer."""
    try:
        status, body = _get(f"{url}/api/v1/targets?state=active")
    except OSError:
        return []
    found: list[dict[str, Any]] = json.loads(body)["data"]["activeTargets"] if status == 200 else []
    return found


def wait_first_scrapes(url: str, timeout_s: float) -> list[dict[str, Any]]:
    """The active targets once every one of them has been scraped at least once (health up or down, not
    "unknown"); right after `up` Prometheus has discovered none yet. Bounded: after timeout_s, what is there."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = targets(url)
        if (found and all(t["health"] != "unknown" for t in found)) or time.monotonic() >= deadline:
            return found
        time.sleep(POLL_INTERVAL_S)
