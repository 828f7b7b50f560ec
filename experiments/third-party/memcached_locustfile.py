"""Locust users for memcached's text protocol: a set/get mix over one plain socket per user.

experiments/third-party/memcached.toml runs it as `[load] locustfile`; by itself:

    locust -f experiments/third-party/memcached_locustfile.py --headless -u 4 -t 30s --host tcp://127.0.0.1:11211

Every command fires Locust's request event (type "memcached", name "set" or "get"), the one Locust's own
statistics, and the runner's client metrics, are counted from. A get that misses is a success: a cache
answers END for a key it does not hold. Each user runs at most --mc-rate commands a second (a fixed offered
load: the runner leaves the pace to the locustfile), keys drawn from --mc-keys, values of --mc-size bytes.
"""

from __future__ import annotations

import random
import socket
import time
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from locust import User, constant_throughput, events, task

CONNECT_TIMEOUT_S = 5.0


@events.init_command_line_parser.add_listener
def _options(parser: Any, **_kw: Any) -> None:
    parser.add_argument("--mc-rate", type=float, default=100.0, help="commands per second per user (0: no wait)")
    parser.add_argument("--mc-keys", type=int, default=10_000, help="size of the keyspace")
    parser.add_argument("--mc-size", type=int, default=256, help="bytes per value")
    parser.add_argument("--mc-get-ratio", type=float, default=0.9, help="share of the commands that are gets")


def _wait(user: User) -> float:
    rate = user.environment.parsed_options.mc_rate
    return constant_throughput(rate)(user) if rate > 0 else 0.0


class MemcachedUser(User):
    wait_time = _wait

    def on_start(self) -> None:
        # The runner gives http://127.0.0.1:PORT (a URL any user can split); any scheme is read the same way.
        url = urlsplit(self.host if "//" in (self.host or "") else f"tcp://{self.host}")
        self._addr = (str(url.hostname or "127.0.0.1"), url.port or 11211)
        opts = self.environment.parsed_options
        self._keys, self._value = opts.mc_keys, random.randbytes(opts.mc_size)
        self._get_ratio = opts.mc_get_ratio
        self._sock: socket.socket | None = None
        self._file: BinaryIO | None = None

    def on_stop(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._file = None, None

    def _connection(self) -> tuple[socket.socket, BinaryIO]:
        if self._sock is None or self._file is None:
            self._sock = socket.create_connection(self._addr, timeout=CONNECT_TIMEOUT_S)
            self._file = self._sock.makefile("rb")
        return self._sock, self._file

    def _call(self, name: str, command: bytes, expect: bytes) -> None:
        start, length, exc = time.perf_counter(), 0, None
        try:
            sock, f = self._connection()
            sock.sendall(command)
            line = f.readline()
            while line.startswith(b"VALUE "):  # VALUE <key> <flags> <bytes>: the data, its CRLF, then END
                size = int(line.split()[3])
                length += len(f.read(size + 2)) - 2
                line = f.readline()
            if line != expect:
                raise RuntimeError(f"memcached answered {line[:80]!r} to {name}, expected {expect!r}")
        except (OSError, RuntimeError, ValueError, IndexError) as e:
            exc = e
            self._close()  # a connection in an unknown state is not reused
        ms = (time.perf_counter() - start) * 1000
        self.environment.events.request.fire(
            request_type="memcached", name=name, response_time=ms, response_length=length, exception=exc, context={}
        )

    @task
    def command(self) -> None:
        key = b"k%d" % random.randrange(self._keys)
        if random.random() < self._get_ratio:
            self._call("get", b"get " + key + b"\r\n", b"END\r\n")
        else:
            head = b"set %s 0 0 %d\r\n" % (key, len(self._value))
            self._call("set", head + self._value + b"\r\n", b"STORED\r\n")
