"""Memory a server holds for a client that never reads its answers, and after a burst of Echo calls.

    .venv/bin/python scripts/studies/measure_conn_bounds.py [BIN_DIR]     (default build/bin)

Prints, per server, the growth of RSS and of live memory (xferd-c: the allocator's allocated bytes;
xferd-go: heap after a forced GC plus goroutine stacks) while one client pipelines 1,000 Reads of
256 KiB and reads nothing, what is still held once it left, and xferd-go's live memory after 100k
pipelined Echo calls against its baseline. Default flags throughout.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from py_client.frame import encode_request  # noqa: E402
from tests.servers.badinput.test_resource_bounds import live_bytes, push, settle  # noqa: E402
from tests.support.raw_frame import RawConn  # noqa: E402
from tests.support.servers import running_server  # noqa: E402
from xfer.v1 import file_transfer_pb2 as ft  # noqa: E402
from xfer.v1 import frame_pb2  # noqa: E402
from xferbench.config import servers  # noqa: E402

MIB = float(1 << 20)


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def flood(name: str) -> None:
    with running_server(name, ["--store=mem"]) as s:
        base_live, base_rss = live_bytes(s), rss(s.proc.pid)
        req = frame_pb2.ReadRequest(name="gen:8388608:7", offset=0, length=256 << 10).SerializeToString()
        data = b"".join(encode_request(i + 1, "Xfer.Read", req) for i in range(1000))
        host, port = s.addr("frame").rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
            push(sock, data, 5.0)
            peak_rss = 0
            for _ in range(3):
                time.sleep(0.5)  # let the server produce what it will
                peak_rss = max(peak_rss, rss(s.proc.pid))
            peak_live = live_bytes(s)
        after = settle(s, base_live)
        print(f"{name} unread flood: RSS +{(peak_rss - base_rss) / MIB:.1f} MiB, live +{(peak_live - base_live) / MIB:.1f}"
              f" MiB; live after the client left +{(after - base_live) / MIB:.1f} MiB")


def echo_burst(name: str, calls: int) -> None:
    with running_server(name, ["--store=mem"]) as s:
        base = live_bytes(s)
        body = ft.EchoRequest(payload=b"x" * 16).SerializeToString()
        frames = b"".join(encode_request(i + 1, "Xfer.Echo", body) for i in range(calls))
        with RawConn(s.addr("frame"), timeout=60) as c:
            seqs: list[int] = []
            reader = threading.Thread(target=lambda: seqs.extend(c.response().seq for _ in range(calls)))
            reader.start()
            c.send(frames)
            reader.join()
        after = settle(s, base, 1 << 20)
        print(f"{name} {calls} Echo burst: live {after / MIB:.1f} MiB after, baseline {base / MIB:.1f} MiB "
              f"(+{(after - base) / MIB:.1f} MiB)")


def main() -> None:
    bin_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "bin").resolve()
    for spec in servers.SERVERS.values():  # every binary from BIN_DIR, by the variable its registry entry names
        os.environ[spec.binary_env] = str(bin_dir / Path(spec.binary).name)
    for name in ("xferd-c", "xferd-go"):
        flood(name)
    echo_burst("xferd-go", 100_000)


if __name__ == "__main__":
    main()
