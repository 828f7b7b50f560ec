"""xferbench load generation: upload, download and echo users over gRPC or frame (see loadgen/README.md).

    locust -f loadgen/ --host grpc://127.0.0.1:50051       # or frame://127.0.0.1:7071

The host's scheme picks the transport. Options (--xfer-*) are registered with Locust's parser, so they
show in the web UI too. This is the only locustfile in loadgen/ (helpers start with `_`, which Locust
skips) and XferShape is the only LoadTestShape: --xfer-profile chooses what it does.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import socket
import sys
import time
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import gevent
import grpc.experimental.gevent as grpc_gevent
from gevent.pywsgi import WSGIServer
from locust import LoadTestShape, User, constant, events, task
from locust.runners import MasterRunner, WorkerRunner

grpc_gevent.init_gevent()  # before any channel exists: grpcio's completion queue polled by gevent

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _xfer_* helpers
try:
    import py_client  # noqa: F401
except ImportError:  # running from outside the repository without the package installed
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import _xfer_metrics as xm  # noqa: E402
import _xfer_options as xo  # noqa: E402
import _xfer_profiles as xp  # noqa: E402
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest  # noqa: E402

from py_client import XferError, connect, parse_target  # noqa: E402
from py_client.content import gen_bytes  # noqa: E402

sys.path.remove(str(Path(__file__).resolve().parent))

log = logging.getLogger("xfer")
EXIT_BAD_OPTION = 2
EXIT_CHECK_FAILED = 3
WORKER_PORT_SPAN = 100  # workers try PORT+1 .. PORT+100


@events.init_command_line_parser.add_listener
def _register_options(parser, **_kw) -> None:
    xo.register(parser)


# ---- per-process state ---------------------------------------------------------------------------

@dataclass
class _State:
    config: xo.Config = field(default_factory=xo.Config)
    role: str = "local"  # local | master | worker
    environment: object = None
    recorder: xm.Recorder = field(default_factory=xm.Recorder)
    baseline: xm.Snapshot = field(default_factory=xm.Snapshot)
    test_started: float = 0.0  # perf_counter at test_start
    test_stopped: float = 0.0  # perf_counter at test_stop (0 while running)
    cpu_stopped: float = 0.0
    cpu_started: float = 0.0
    metrics_url: str = ""
    workers_urls: dict[str, str] = field(default_factory=dict)  # master: client id -> url
    workers_latest: dict[str, xm.Snapshot] = field(default_factory=dict)  # master: cumulative
    workers_base: dict[str, xm.Snapshot] = field(default_factory=dict)  # master: at test start
    worker_count: int = 1  # worker: how many workers share --xfer-rate (sent by the master)
    transport: str = ""
    seed: int = 0
    payload: bytes = b""
    upload_prefix: str = ""
    user_seq: int = 0
    user_classes: list = field(default_factory=list)  # every user class, before --xfer-mix dropped any


S = _State()
_registry = CollectorRegistry()
ProcessCollector(registry=_registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...


def _fail_start(message: str) -> None:
    sys.stderr.write(f"locust: error: {message}\n")
    sys.exit(EXIT_BAD_OPTION)


def _check_host(host: str | None) -> str:
    if not host:
        raise ValueError("--host is required: grpc://HOST:PORT or frame://HOST:PORT "
                         "(the scheme picks the transport)")
    try:
        return parse_target(host).scheme
    except ValueError as e:
        raise ValueError(f"--host: {e}") from None


@events.init.add_listener
def _on_init(environment, runner, **_kw) -> None:
    S.environment = environment
    S.role = ("master" if isinstance(runner, MasterRunner)
              else "worker" if isinstance(runner, WorkerRunner) else "local")
    opts = environment.parsed_options
    try:
        S.config = xo.from_options(opts)
        if S.role != "worker" and (environment.host or getattr(opts, "headless", False)):
            S.transport = _check_host(environment.host)
        if (S.role != "worker" and getattr(opts, "headless", False)
                and S.config.profile in xp.NEEDS_RUN_TIME and not getattr(opts, "run_time", None)):
            raise ValueError(f"--xfer-profile {S.config.profile} needs -t/--run-time (its shape is scaled "
                             "to the run time)")
    except ValueError as e:
        _fail_start(str(e))
    S.user_classes = list(environment.user_classes)
    try:
        _apply_mix(environment)
    except ValueError as e:
        _fail_start(str(e))
    S.seed = random.SystemRandom().getrandbits(32)
    S.upload_prefix = f"lg-{socket.gethostname()[:40].replace('/', '_')}-{os.getpid()}"
    _start_metrics_server(runner)
    if S.role == "worker":
        runner.register_message("xfer_share", _on_share)
    S.test_started = time.perf_counter()
    S.cpu_started = time.process_time()


def _apply_mix(environment) -> None:
    """Sets the user classes' weights from --xfer-mix and drops the disabled ones."""
    weights = {"UploadUser": S.config.mix["upload"], "DownloadUser": S.config.mix["download"],
               "EchoUser": S.config.mix["echo"]}
    for cls in S.user_classes:
        if cls.__name__ in weights:
            cls.weight = weights[cls.__name__]
    kept = [c for c in S.user_classes if c.weight > 0 or c.fixed_count > 0]
    if not kept:
        raise ValueError("--xfer-mix leaves no user class with a weight above 0 among "
                         + ", ".join(c.__name__ for c in S.user_classes))
    environment.user_classes[:] = kept


def _on_share(environment, msg, **_kw) -> None:
    S.worker_count = max(1, int(msg.data.get("workers", 1)))


# ---- metrics endpoint ----------------------------------------------------------------------------

def _users_here() -> int:
    runner = getattr(S.environment, "runner", None)
    if runner is None or S.role == "master":
        return 0
    return runner.user_count


def _info_gauges() -> list[tuple[str, str, str, float]]:
    gauges = [("xfer_client_info", "This Locust process: role (local, master, worker) and pid.",
               xm._labels(role=S.role, pid=str(os.getpid()), transport=S.transport or "",
                          profile=S.config.profile), 1)]
    if S.role == "master":
        runner = S.environment.runner
        gauges.append(("xfer_client_cluster_users", "Users running on all workers (master only).", "",
                       runner.user_count if runner else 0))
        for cid, url in sorted(S.workers_urls.items()):
            gauges.append(("xfer_client_worker_info", "A worker and the URL of its /metrics (master only).",
                           xm._labels(worker=cid, url=url), 1))
    return gauges


def _own_text() -> str:
    return (xm.render(S.recorder, users=_users_here(), extra_gauges=_info_gauges())
            + generate_latest(_registry).decode())


def _cluster_snapshot(since_test_start: bool) -> xm.Snapshot:
    if S.role != "master":
        snap = S.recorder.copy()
        return snap.add(S.baseline, -1) if since_test_start else snap
    total = xm.Snapshot()
    for cid, snap in S.workers_latest.items():
        total.add(snap)
        if since_test_start and cid in S.workers_base:
            total.add(S.workers_base[cid], -1)
    return total


def _cluster_text() -> str:
    runner = S.environment.runner
    users = runner.user_count if runner else 0
    return xm.render(_cluster_snapshot(False), users=users)


def _wsgi(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    if path == "/metrics":
        body, ctype = _own_text(), "text/plain; version=0.0.4; charset=utf-8"
    elif path == "/metrics/cluster":
        body, ctype = _cluster_text(), "text/plain; version=0.0.4; charset=utf-8"
    elif path == "/workers":
        body = json.dumps({"role": S.role, "self": S.metrics_url, "workers": S.workers_urls}, indent=1)
        ctype = "application/json"
    else:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics, /metrics/cluster or /workers\n"]
    data = body.encode()
    start_response("200 OK", [("Content-Type", ctype), ("Content-Length", str(len(data)))])
    return [data]


def _start_metrics_server(runner) -> None:
    port, host = S.config.metrics_port, S.config.metrics_host
    if port is None:
        return
    if S.role == "worker":
        candidates = [0] if port == 0 else list(range(port + 1, min(65536, port + 1 + WORKER_PORT_SPAN)))
    else:
        candidates = [port]
    last: OSError | None = None
    for p in candidates:
        server = WSGIServer((host, p), _wsgi, log=None, error_log=None)
        try:
            server.start()
        except OSError as e:
            last = e
            continue
        bound = server.socket.getsockname()[1]
        S.metrics_url = f"http://{host}:{bound}/metrics"
        log.info("xfer client metrics (%s) at %s", S.role, S.metrics_url)
        sys.stderr.write(f"xfer-metrics role={S.role} pid={os.getpid()} url={S.metrics_url}\n")
        return
    if S.role == "worker":
        _fail_start(f"--xfer-metrics-port {port}: no free port for this worker in {candidates[0]}.."
                    f"{candidates[-1]} ({last})")
    _fail_start(f"--xfer-metrics-port {port}: cannot bind {host}:{port} ({last}); "
                "pick another port, 0 for any free one, or off")


@events.request.add_listener
def _on_request(request_type, name, response_time, exception=None, context=None, **_kw) -> None:
    if request_type not in ("grpc", "frame"):
        return
    code = ""
    if exception is not None:
        code = (context or {}).get("code", "") or "unknown"
    S.recorder.observe(request_type, name, response_time / 1000.0, exception is None, code)


@events.report_to_master.add_listener
def _on_report_to_master(client_id, data, **_kw) -> None:
    snap = S.recorder.copy()
    snap.cpu_seconds = time.process_time() - S.cpu_started
    data["xfer"] = snap.to_wire()
    data["xfer_metrics_url"] = S.metrics_url


@events.worker_report.add_listener
def _on_worker_report(client_id, data, **_kw) -> None:
    if "xfer" in data:
        S.workers_latest[client_id] = xm.Snapshot.from_wire(data["xfer"])
    if data.get("xfer_metrics_url"):
        S.workers_urls[client_id] = data["xfer_metrics_url"]


@events.test_start.add_listener
def _on_test_start(environment, **_kw) -> None:
    # Workers get the master's --xfer-* values with every spawn message: read them again.
    try:
        S.config = xo.from_options(environment.parsed_options)
        if environment.host:
            S.transport = _check_host(environment.host)
        # The web UI can change --xfer-mix between tests; Locust reads the weights when it dispatches
        # users, after this event. Workers spawn what the master dispatches, so only it needs them.
        if S.role != "worker":
            _apply_mix(environment)
    except ValueError as e:
        log.error("%s", e)
        raise
    S.baseline = S.recorder.copy()
    S.test_started = time.perf_counter()
    S.test_stopped = 0.0
    S.cpu_started = time.process_time()
    if S.role == "master":
        S.workers_base = {cid: snap.copy() for cid, snap in S.workers_latest.items()}
        runner = environment.runner
        workers = len(runner.clients.ready) + len(runner.clients.running) + len(runner.clients.spawning)
        runner.send_message("xfer_share", {"workers": max(1, workers)})
    _payload_for(S.config)


@events.test_stop.add_listener
def _on_test_stop(environment, **_kw) -> None:
    S.test_stopped = time.perf_counter()
    S.cpu_stopped = time.process_time()


def _wall() -> float:
    return max(1e-9, (S.test_stopped or time.perf_counter()) - S.test_started)


@events.quitting.add_listener
def _on_quitting(environment, **_kw) -> None:
    if S.role != "worker":
        wall = _wall()
        snap = _cluster_snapshot(True)
        cpu = _cpu_percent(wall)
        print(_summary(snap, wall, cpu), file=sys.stderr, flush=True)
        if S.config.checks:
            ok = _evaluate_checks(snap, wall, cpu)
            if not ok:
                environment.process_exit_code = EXIT_CHECK_FAILED
            elif not environment.runner.exceptions:
                environment.process_exit_code = 0
    if S.config.metrics_dump:
        folder = Path(S.config.metrics_dump)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{S.role}-{os.getpid()}.prom").write_text(_own_text())


def _cpu_percent(wall: float) -> float:
    """Generator CPU in % of one core: this process (local), or the busiest worker (master)."""
    if S.role != "master":
        end = time.process_time() if not S.test_stopped else S.cpu_stopped
        return 100.0 * (end - S.cpu_started) / wall
    if not S.workers_latest:
        return 0.0
    return max(100.0 * s.cpu_seconds / wall for s in S.workers_latest.values())


def _summary(snap: xm.Snapshot, wall: float, cpu: float) -> str:
    ms = 1000.0
    lines = [f"xfer summary ({S.role}, {wall:.1f} s; percentiles from client histograms, 1% precision)",
             f"{'transport':9} {'method':14} {'requests':>9} {'errors':>7} {'req/s':>9} {'avg ms':>9} "
             f"{'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'max ms':>9}"]
    for (t, m), s in sorted(snap.series.items()):
        if not s.count:
            continue
        lines.append(f"{t:9} {m:14} {s.count:9d} {s.err:7d} {s.count / wall:9.1f} "
                     f"{s.sum / s.count * ms:9.3f} {xm.quantile([s], .5) * ms:9.3f} "
                     f"{xm.quantile([s], .95) * ms:9.3f} {xm.quantile([s], .99) * ms:9.3f} {s.max * ms:9.3f}")
    up, down = snap.bytes.get("upload", 0), snap.bytes.get("download", 0)
    ver_ok = sum(n for (_m, r), n in snap.verified.items() if r == "ok")
    ver_bad = sum(n for (_m, r), n in snap.verified.items() if r != "ok")
    lines.append(f"upload {up / wall / 1e6:.1f} MB/s, download {down / wall / 1e6:.1f} MB/s; "
                 f"verified {ver_ok}, mismatched {ver_bad}; generator CPU {cpu:.0f}% of a core"
                 + (" (busiest worker)" if S.role == "master" else ""))
    if cpu > 90:
        lines.append("WARNING: the load generator used more than 90% of a core: it may be the bottleneck "
                     "(use --processes or more workers)")
    return "\n".join(lines)


def check_value(check: xo.Check, snap: xm.Snapshot, wall: float, cpu: float) -> float:
    top = snap.methods(None)
    if check.metric == "failures":
        return float(sum(s.err for s in top))
    if check.metric == "requests":
        return float(sum(s.count for s in top))
    if check.metric == "failure_ratio":
        n = sum(s.count for s in top)
        return sum(s.err for s in top) / n if n else 0.0
    if check.metric == "rps":
        return sum(s.count for s in top) / wall
    if check.metric == "cpu":
        return cpu
    series = snap.methods(check.method)
    n = sum(s.count for s in series)
    if n == 0:
        return math.nan
    if check.metric == "avg":
        return sum(s.sum for s in series) / n
    if check.metric == "max":
        return max(s.max for s in series)
    return xm.quantile(series, check.quantile)


def _evaluate_checks(snap: xm.Snapshot, wall: float, cpu: float) -> bool:
    all_ok = True
    for c in S.config.checks:
        value = check_value(c, snap, wall, cpu)
        ok = not math.isnan(value) and c.holds(value)
        all_ok &= ok
        print(f"xfer-check {'PASS' if ok else 'FAIL'}: {c.text} (measured {value:.6g})",
              file=sys.stderr, flush=True)
    if not all_ok:
        log.error("--xfer-check failed: exit code %d", EXIT_CHECK_FAILED)
    return all_ok


# ---- payloads --------------------------------------------------------------------------------------

def _payload_for(cfg: xo.Config) -> bytes:
    """One buffer per process: the content of gen:<N>:<seed>; its first n bytes are gen:<n>:<seed>."""
    need = max(cfg.sizes.max_size, cfg.echo_sizes.max_size, 1)
    if len(S.payload) < need:
        S.payload = gen_bytes(need, S.seed)
        _prefix_crc.cache_clear()
        _echo_payload.cache_clear()
    return S.payload


@lru_cache(maxsize=4096)
def _prefix_crc(size: int) -> int:
    return zlib.crc32(memoryview(S.payload)[:size]) & 0xFFFFFFFF


@lru_cache(maxsize=256)
def _echo_payload(size: int) -> bytes:
    return S.payload[:size]


class _Sink:
    """Downloads are verified chunk by chunk by py_client; the bytes themselves are not kept."""

    def write(self, data: bytes) -> int:
        return len(data)


class XferFailure(Exception):
    """A failed call as Locust shows it: the error text exactly as the server (or client) gave it."""

    def __init__(self, text: str, code: str) -> None:
        super().__init__(text)
        self.code = code

    def __repr__(self) -> str:
        return str(self)


# ---- users -----------------------------------------------------------------------------------------

class _XferUser(User):
    abstract = True
    wait_time = constant(0)
    method = ""

    def __init__(self, environment) -> None:
        super().__init__(environment)
        S.user_seq += 1
        self.seq = S.user_seq
        self.rng = random.Random(S.seed ^ (self.seq * 0x9E3779B9))
        self.client = None
        self.next_start: float | None = None
        self.sink = _Sink()

    def on_start(self) -> None:
        cfg = S.config
        _check_host(self.environment.host)
        self.transport = parse_target(self.environment.host).scheme
        self.client = connect(self.environment.host, inflight=cfg.inflight, timeout=cfg.timeout)

    def on_stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def _start_time(self) -> float:
        """Closed loop: now. Open loop: the intended start on this user's schedule (sleeping till then)."""
        rate = S.config.rate
        now = time.perf_counter()
        if rate is None:
            return now
        share = rate.per_second / (S.worker_count if S.role == "worker" else 1)
        users = max(1, self.environment.runner.user_count if self.environment.runner else 1)
        per_user = share / users
        gap = self.rng.expovariate(per_user) if rate.poisson else 1.0 / per_user
        if self.next_start is None:
            self.next_start = now + self.rng.random() * (1.0 / per_user)
        else:
            self.next_start += gap
        if self.next_start > now:
            gevent.sleep(self.next_start - now)
        return self.next_start

    def _fire(self, name: str, start: float, length: int, error: XferError | None = None,
              seconds: float | None = None) -> None:
        elapsed = (time.perf_counter() - start) if seconds is None else seconds
        self.environment.events.request.fire(
            request_type=self.transport, name=name, response_time=elapsed * 1000.0, response_length=length,
            response=None, context={"code": error.code} if error else {},
            exception=XferFailure(str(error), error.code) if error else None,
        )

    def _failed(self, start: float, error: XferError) -> None:
        self._fire(self.method, start, 0, error)
        if error.code in ("unavailable", "deadline_exceeded"):
            gevent.sleep(0.05)  # a dead server must not turn this loop into a busy loop

    @task
    def call(self) -> None:
        start = self._start_time()
        try:
            self.run_once(start)
        except XferError as e:
            self._failed(start, e)
        except (ValueError, OSError) as e:  # a client-side failure, reported as such
            self._failed(start, XferError("internal", f"client: {e!r}"))

    def run_once(self, start: float) -> None:
        raise NotImplementedError


class UploadUser(_XferUser):
    """Uploads gen content of --xfer-sizes in --xfer-chunk chunks, under a name of its own (overwritten)."""

    method = "Upload"

    def run_once(self, start: float) -> None:
        cfg = S.config
        size = cfg.sizes.pick(self.rng)
        data = memoryview(_payload_for(cfg))[:size]
        res = self.client.upload(f"{S.upload_prefix}-{self.seq}", data, chunk_size=cfg.chunk)
        self._fire("Upload", start, size)
        S.recorder.add_bytes("upload", size)
        for s in res.chunk_seconds:
            self._fire("UploadChunk", 0.0, min(cfg.chunk, size), seconds=s)
        if cfg.verify:  # py_client compared the server's commit CRC with its own; compare with the content's
            S.recorder.verify("Upload", res.crc32 == _prefix_crc(size))


class DownloadUser(_XferUser):
    """Downloads gen:<size>:<seed> (no upload needed) and checks it against the known content's CRC-32."""

    method = "Download"

    def run_once(self, start: float) -> None:
        cfg = S.config
        size = cfg.sizes.pick(self.rng)
        _payload_for(cfg)
        try:
            res = self.client.download(f"gen:{size}:{S.seed}", chunk_size=cfg.chunk, out=self.sink,
                                       verify=cfg.verify)
        except XferError as e:
            # py_client's own check of the assembled file (CRC-32, byte count) failed: a mismatch too.
            if cfg.verify and e.code == "data_loss":
                S.recorder.verify("Download", False)
            raise
        ok = not cfg.verify or (res.bytes == size and res.crc32 == _prefix_crc(size))
        if not ok:
            err = XferError("data_loss", f"gen:{size}:{S.seed}: got {res.bytes} bytes crc32 "
                                         f"0x{res.crc32:08x}, want {size} bytes 0x{_prefix_crc(size):08x}")
            S.recorder.verify("Download", False)
            raise err
        self._fire("Download", start, size)
        S.recorder.add_bytes("download", size)
        for s in res.chunk_seconds:
            self._fire("DownloadChunk", 0.0, min(cfg.chunk, size), seconds=s)
        if cfg.verify:
            S.recorder.verify("Download", True)


class EchoUser(_XferUser):
    """Unary Echo of --xfer-echo-size payloads (the small-message, allocation-heavy case)."""

    method = "Echo"

    def run_once(self, start: float) -> None:
        cfg = S.config
        _payload_for(cfg)
        payload = _echo_payload(cfg.echo_sizes.pick(self.rng))
        got = self.client.echo(payload)
        if cfg.verify:
            same = got == payload
            S.recorder.verify("Echo", same)
            if not same:
                raise XferError("data_loss", f"echo returned {len(got)} bytes that differ from the "
                                             f"{len(payload)} sent")
        self._fire("Echo", start, len(payload))


# ---- the one shape ----------------------------------------------------------------------------------

class XferShape(LoadTestShape):
    """--xfer-profile steady|ramp|step|spike|soak, scaled to -u, -r and -t (see _xfer_profiles.py)."""

    use_common_options = True

    def tick(self):
        opts = self.runner.environment.parsed_options
        users = int(getattr(opts, "num_users", None) or 1)
        rate = float(getattr(opts, "spawn_rate", None) or 1)
        run_time = getattr(opts, "run_time", None) or None
        profile = xo.parse_profile(getattr(opts, "xfer_profile", None) or "steady")
        target = xp.users_at(profile, self.get_run_time(), users, run_time)
        if target is None:
            return None
        return target, xp.spawn_rate_for(profile, users, rate, run_time)
