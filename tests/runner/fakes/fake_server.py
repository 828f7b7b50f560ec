"""A stand-in server speaking the process interface of proto/PROTOCOL.md (ready line, /metrics, SIGTERM),
for runner tests that must not depend on the real servers' performance. Run as
`python fake_server.py NAME --metrics-addr=127.0.0.1:0 ...`. FAKE_DIE_AFTER=S makes it die (status 3)
after S seconds, printing a last words line to stderr."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    start_http_server,
)

BUCKETS = (
    0.0001,
    0.00015,
    0.0002,
    0.0003,
    0.0005,
    0.0007,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.005,
    0.007,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.07,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    0.7,
    1,
    1.5,
    2,
    3,
    5,
    7,
    10,
)


def main() -> None:
    name = sys.argv[1]
    flags = dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--") and "=" in a)
    if os.environ.get("FAKE_FAIL_START"):
        print(f"{name}: error: listen tcp 127.0.0.1:0: fake failure", file=sys.stderr, flush=True)
        sys.exit(1)
    reg = CollectorRegistry()
    ProcessCollector(registry=reg)
    reqs = Counter("xfer_requests", "", ["transport", "method", "code"], registry=reg)
    dur = Histogram(
        "xfer_request_duration_seconds", "", ["transport", "method"], buckets=BUCKETS, registry=reg
    )
    Gauge("xfer_build_info", "", ["server", "allocator"], registry=reg).labels(
        name, flags.get("alloc", "go")
    ).set(1)
    listeners = {}
    for key in ("grpc", "frame"):
        if f"{key}-addr" in flags:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            host, port = flags[f"{key}-addr"].rsplit(":", 1)
            s.bind((host, int(port)))
            s.listen()
            listeners[key] = s
    host, port = flags.get("metrics-addr", "127.0.0.1:0").rsplit(":", 1)
    srv, _ = start_http_server(int(port), addr=host, registry=reg)
    maddr = f"{host}:{srv.server_port}"
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def work() -> None:
        while not stop.is_set():
            reqs.labels("frame", "Echo", "ok").inc()
            dur.labels("frame", "Echo").observe(0.001)
            time.sleep(0.002)

    threading.Thread(target=work, daemon=True).start()
    addrs = " ".join(f"{k}={s.getsockname()[0]}:{s.getsockname()[1]}" for k, s in listeners.items())
    print(f"{name} ready {addrs} metrics={maddr} store=mem", file=sys.stderr, flush=True)
    die = float(os.environ.get("FAKE_DIE_AFTER", "0"))
    if die:
        stop.wait(die)
        if not stop.is_set():
            print(f"{name}: error: fake crash after {die}s", file=sys.stderr, flush=True)
            os._exit(3)
    stop.wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
