"""Toxiproxy: its server as a child process, and the few calls of its HTTP API that xferbench makes.

The runner puts one in front of a cell's server when the experiment has a `[network]` table, and the fault
tests (tests/support/toxiproxy.py) drive it to cut, stall and slice connections.

Why the HTTP API through urllib rather than the `toxiproxy-python` package: that package's last release
(0.1.1) dates from January 2019 and predates Toxiproxy 2.x's later API; the calls needed here are five JSON
requests, which one small module covers without another dependency to keep working.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xferbench.config import ROOT, Network
from xferbench.run.process import READY_TIMEOUT_S, ServerStartError, free_port, spawn, stop, wait_until

BIN_ENV = "XFERBENCH_TOXIPROXY_BIN"
STREAMS = ("upstream", "downstream")  # upstream: client → server; downstream: server → client

# Loopback only, never through an HTTP proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def binary() -> Path:
    """$XFERBENCH_TOXIPROXY_BIN, or build/bin/toxiproxy-server (scripts/bootstrap.sh builds it)."""
    return Path(os.environ.get(BIN_ENV) or ROOT / "build" / "bin" / "toxiproxy-server")


class ToxiproxyError(RuntimeError):
    """An API call Toxiproxy refused or did not answer; the message carries its reply."""


@dataclass(frozen=True)
class Toxic:
    """One toxic as Toxiproxy's API takes it (attributes as documented for each type)."""

    type: str
    attributes: dict[str, int | float] = field(default_factory=dict)
    stream: str = "downstream"
    name: str = ""
    toxicity: float = 1.0

    def body(self) -> dict[str, Any]:
        return {
            "name": self.name or f"{self.type}_{self.stream}",
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": self.attributes,
        }


def network_toxics(net: Network) -> list[Toxic]:
    """An experiment's [network] as toxics. Latency goes on the server → client side only, so a request and
    its response together gain `latency` once (one round trip), not twice; bandwidth limits both ways."""
    toxics = []
    if net.latency_ms:
        toxics.append(Toxic("latency", {"latency": net.latency_ms, "jitter": net.jitter_ms}, "downstream"))
    if net.bandwidth:
        rate = max(1, net.bandwidth // 1000)  # Toxiproxy's unit: 1000 bytes per second
        toxics += [Toxic("bandwidth", {"rate": rate}, s) for s in STREAMS]
    return toxics


class Toxiproxy:
    """toxiproxy-server on a free loopback port; ready once its API answers GET /version."""

    def __init__(self, log_path: Path | None = None, cpus: Sequence[int] | None = None,
                 ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        exe = binary()
        if not exe.exists():
            raise ServerStartError(f"{exe} does not exist; run `make build` (scripts/bootstrap.sh builds it)", [])
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        # Its log goes to a file (a temporary one if none is given): the drain costs no thread, and the tail
        # explains a failed start.
        self._own_log = log_path is None
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="toxiproxy-", suffix=".log")
            os.close(fd)
            log_path = Path(name)
        self.log_path = log_path
        self._log = open(self.log_path, "wb")
        env = {**os.environ, "LOG_LEVEL": os.environ.get("LOG_LEVEL", "warn")}  # not one line per connection
        self.proc = spawn([str(exe), "-host", "127.0.0.1", "-port", str(self.port)], env=env,
                          stdout=self._log, stderr=subprocess.STDOUT, cpus=cpus)
        try:
            self._wait_ready(ready_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout_s: float) -> None:
        def answers() -> bool:
            try:
                self.version()
                return True
            except ToxiproxyError:
                return False

        wait_until(answers, self.proc, f"toxiproxy-server (API {self.api})", timeout_s, self.tail)

    def tail(self, n: int = 40) -> list[str]:
        with contextlib.suppress(OSError, ValueError):
            self._log.flush()
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return []

    # ---- the API ----------------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with _OPENER.open(req, timeout=5.0) as r:
                text = r.read()
        except urllib.error.HTTPError as e:
            raise ToxiproxyError(f"{method} {path}: HTTP {e.code}: {e.read().decode(errors='replace').strip()}") from None
        except (OSError, urllib.error.URLError) as e:
            raise ToxiproxyError(f"{method} {path}: {e}") from None
        return json.loads(text) if text.strip() else None

    def version(self) -> str:
        reply = self._call("GET", "/version")
        return str(reply.get("version") if isinstance(reply, dict) else reply)

    def create_proxy(self, name: str, upstream: str, listen: str = "127.0.0.1:0") -> str:
        """Creates an enabled proxy to `upstream` and returns the host:port it listens on (port 0 picks one)."""
        reply = self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        return str(reply["listen"])

    def delete_proxy(self, name: str) -> None:
        self._call("DELETE", f"/proxies/{name}")

    def set_enabled(self, name: str, enabled: bool) -> None:
        """A disabled proxy closes its connections and refuses new ones (the server looks down)."""
        self._call("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(self, proxy: str, toxic: Toxic) -> str:
        """Adds a toxic; it acts on connections open now and later. Returns its name."""
        reply = self._call("POST", f"/proxies/{proxy}/toxics", toxic.body())
        return str(reply["name"])

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/proxies/{proxy}/toxics"))

    def reset(self) -> None:
        """Every proxy enabled again, every toxic removed."""
        self._call("POST", "/reset")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        code = stop(self.proc, grace_s=5.0)
        with contextlib.suppress(OSError):
            self._log.close()
        if self._own_log:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
        return code
