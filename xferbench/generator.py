"""The load generator of a run (`[load] driver`): Locust with loadgen, or xferload, the native frame driver.

Both are one child process, pinned to the generator's CPUs, that serves the same client families
(xfer_client_*, process_cpu_seconds_total; docs/DESIGN.md) on a metrics port given on its command line; it
is ready when that port answers, scraped every second, and stopped with SIGTERM. They differ only in their
command line, so `Generator` is the process and each driver a subclass giving its `argv`.

xferload runs one method per process with a fixed request, so `xferload_args` maps the [load] keys it
honours and refuses, with the key and the reason, every one it cannot (experiment parsing calls it, so a
bad combination fails before any run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import loadgen
from xferbench.experiment import LOADGEN_KEYS, ROOT, Load
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
XFERLOAD_METHODS = {"echo", "meta"}  # one call per operation, as loadgen counts them (see xferload_args)
XFERLOAD_MAX_INFLIGHT = 256


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


def check_driver(load: Load) -> None:
    """Raises ValueError naming the [load] key the cell's driver cannot honour."""
    if load.driver == "xferload":
        xferload_args(load)
    elif load.frame_codec != "protobuf":
        raise ValueError(f'frame_codec = {load.frame_codec!r} needs driver = "xferload": loadgen (Python) has '
                         "no gob client")


def xferload_args(load: Load) -> list[str]:
    """xferload's flags for the [load] keys it honours: users → --conns (one connection per user, as a
    Locust frame user), inflight → --inflight, rate → --rate, echo_size → --size, meta_entries → --entries,
    meta_size → --entry-size, verify, frame_codec → --codec. sizes and chunk only concern upload and
    download, which it does not run here. Raises ValueError for the rest."""
    opt = loadgen.option
    if load.transport != "frame":
        raise ValueError(f'transport = {load.transport!r}: xferload speaks the frame protocol only; use driver = '
                         '"locust" for gRPC')
    if load.profile != "steady":
        raise ValueError(f'profile = {load.profile!r}: xferload keeps a steady load; use driver = "locust" for '
                         "load profiles")
    methods = [m for m, w in opt("mix").parse(load.mix).items() if w > 0]
    if len(methods) != 1:
        raise ValueError(f"mix = {load.mix!r}: xferload runs one method per process; give one method "
                         '(e.g. "meta:1") or use driver = "locust" for a mix')
    method = methods[0]
    if method not in XFERLOAD_METHODS:
        raise ValueError(f"mix = {load.mix!r}: with xferload the runner drives echo or meta; xferload's "
                         f"{method} calls are frames, while loadgen's {method} is a whole transfer, so their "
                         'figures would not compare; use driver = "locust"')
    if load.spawn_rate < load.users:
        raise ValueError(f"spawn_rate = {load.spawn_rate:g} < users = {load.users}: xferload opens every "
                         "connection at once; set spawn_rate >= users")
    if load.grpc_inflight is not None:
        raise ValueError("grpc_inflight: a gRPC setting; xferload speaks the frame protocol")
    if not 1 <= load.inflight <= XFERLOAD_MAX_INFLIGHT:
        raise ValueError(f"inflight = {load.inflight}: xferload keeps 1..{XFERLOAD_MAX_INFLIGHT} calls in flight "
                         "per connection")
    args = ["--method", method, "--conns", str(load.users), "--inflight", str(load.inflight)]
    rate = opt("rate").parse(load.rate) if load.rate else None
    if rate is not None:
        if rate.poisson:
            raise ValueError(f"rate = {load.rate!r}: xferload sends at constant intervals; give R or constant:R")
        args += ["--rate", f"{rate.per_second:g}"]
    if load.echo_size is not None:
        size = opt("echo_size").parse(load.echo_size)
        if size.kind != "list" or len(size.values) != 1:
            raise ValueError(f"echo_size = {load.echo_size!r}: xferload sends one payload size; give one size")
        args += ["--size", str(size.values[0])]
    if load.meta_entries is not None:
        args += ["--entries", str(opt("meta_entries").parse(load.meta_entries))]
    if load.meta_size is not None:
        lo, hi = opt("meta_size").parse(load.meta_size)
        args += ["--entry-size", f"{lo}-{hi}"]
    if load.verify == "off":
        args += ["--verify=false"]
    if load.frame_codec != "protobuf":  # the flag is new; the default needs none
        args += ["--codec", load.frame_codec]
    return args
