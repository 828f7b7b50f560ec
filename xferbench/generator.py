"""The load generator of a run (`[load] driver`): Locust with loadgen, or xferload, the native frame driver.

Both are one child process, pinned to the generator's CPUs, that serves the same client families
(xfer_client_*, process_cpu_seconds_total; docs/DESIGN.md) on a metrics port given on its command line; it
is ready when that port answers, scraped every second, and stopped with SIGTERM. They differ only in their
command line, so `Generator` is the process and each driver a subclass giving its `argv`.

xferload runs one method per process with a fixed request, so `xferload_args` maps the [load] keys it
honours and refuses, with the key and the reason, every one it cannot. It lives in xferbench/experiment.py,
beside the [load] schema: parsing calls it, so a bad combination fails before any run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import loadgen
from xferbench.experiment import LOADGEN_KEYS, ROOT, Load, xferload_args
from xferbench.process import (
    READY_TIMEOUT_S,
    STOP_GRACE_S,
    TAIL_LINES,
    ServerStartError,
    port_open,
    spawn,
    stop,
    wait_until,
)

DRIVERS = ("locust", "xferload")
FRAME_CODECS = ("protobuf", "gob")
XFERLOAD = ROOT / "build" / "bin" / "xferload"


class Generator:
    """A load generator child, output to a log file; ready when its metrics port answers."""

    name = "generator"

    def __init__(self, host: str, load: Load, metrics_port: int, run_time_s: float, log_path: Path,
                 cpus: Sequence[int] | None = None) -> None:
        self.argv = self.command(host, load, metrics_port, run_time_s)
        if os.path.isabs(self.argv[0]) and not Path(self.argv[0]).exists():
            raise ServerStartError(f"{self.argv[0]} does not exist; run `make build`", [])
        self.metrics_port = metrics_port
        self.log_path = log_path
        self._log = open(log_path, "wb")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = spawn(self.argv, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, cpus=cpus)

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        raise NotImplementedError

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Polls the metrics port until it answers; raises ServerStartError with the output tail if the
        generator exits or the deadline passes."""
        wait_until(lambda: port_open("127.0.0.1", self.metrics_port), self.proc,
                   f"{self.name} (metrics port {self.metrics_port})", timeout_s, self.tail)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = TAIL_LINES) -> list[str]:
        self._log.flush()
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return []

    def stop(self, grace_s: float = STOP_GRACE_S) -> int:
        code = stop(self.proc, grace_s=grace_s)
        self._log.close()
        return code


class LocustGenerator(Generator):
    name = "locust"

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        return locust_argv(host, load, metrics_port, run_time_s)


class XferloadGenerator(Generator):
    name = "xferload"

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        addr = host.split("://", 1)[-1]
        return [str(XFERLOAD), "--addr", addr, "--metrics-addr", f"127.0.0.1:{metrics_port}",
                "--duration", f"{max(1, round(run_time_s))}s", "--drain", "5s", *xferload_args(load)]


def generator_class(driver: str) -> type[Generator]:
    return {"locust": LocustGenerator, "xferload": XferloadGenerator}[driver]


def locust_argv(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
    """The Locust command line for one cell's load: Locust's own flags, then every [load] value that is a
    loadgen option as loadgen spells it (loadgen.command_line)."""
    xfer = {k: getattr(load, k) for k in LOADGEN_KEYS if getattr(load, k) is not None}
    return [
        sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen"), "--headless", "--host", host,
        "-u", str(load.users), "-r", f"{load.spawn_rate:g}", "-t", f"{max(1, round(run_time_s))}s",
        *loadgen.command_line({**xfer, "metrics_port": metrics_port}),
        "--only-summary", "--loglevel", "WARNING",
    ]
