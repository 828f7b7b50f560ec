"""The processes a bench case runs: a server pinned to the server CPU, and clients on the generator CPU
(iperf3, ghz, xferload, one Locust), each bounded by a timeout, as scripts/studies/lib.sh does in shell."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xferbench.config import servers
from xferbench.config.files import ROOT
from xferbench.config.tls import ClientTLS
from xferbench.measure import procfs, tree
from xferbench.measure.cgroup import Cgroup
from xferbench.run import process

SERVER_CPUS = (0,)
GEN_CPUS = (1,)
BIN = ROOT / "build" / "bin"
GHZ = BIN / "ghz"
XFERLOAD = BIN / "xferload"
GRPCXFER = BIN / "grpcxfer"
LOCUST = ROOT / ".venv" / "bin" / "locust"
PROTO = ("--proto", str(ROOT / "proto/xfer/v1/file_transfer.proto"), "--import-paths", str(ROOT / "proto"))
GRPC_FILE_MIB = 8  # the gRPC upload: header, 8 chunks of 1 MiB, trailer
TCP_LISTEN = 0x0A  # include/net/tcp_states.h
SLACK_S = 30.0  # beyond its own window, what a client may take before it is killed
SOCAT_BUF = 1 << 20  # the TLS anchor's read and SSL_write size: a frame chunk's


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class Route:
    """Where a case's server listens and its clients run: loopback by default; for the lab path, the server in one
    network namespace host and the clients in another (xferbench/tools/bench/lab.py)."""

    address: str = "127.0.0.1"
    server_ns: str | None = None
    client_ns: str | None = None

    def server(self, argv: Sequence[str]) -> list[str]:
        return _inside(self.server_ns, argv)

    def client(self, argv: Sequence[str]) -> list[str]:
        return _inside(self.client_ns, argv)


def _inside(ns: str | None, argv: Sequence[str]) -> list[str]:
    # ip netns exec execs the command: its pid, cgroup and CPU pinning are the process's own. Its whole path: a
    # server's argv[0] is checked to exist.
    return [shutil.which("ip") or "/usr/sbin/ip", "netns", "exec", ns, *argv] if ns else list(argv)


LOOPBACK = Route()


def missing() -> list[str]:
    """The tools the cases need that are not there (`make build` brings them all)."""
    bins = [GHZ, XFERLOAD, GRPCXFER, LOCUST, *(Path(s.default_binary()) for s in servers.SERVERS.values())]
    return [str(b) for b in bins if not b.exists()] + [t for t in ("iperf3", "socat", "openssl") if not shutil.which(t)]


def cpu_seconds(srv: process.Server) -> float:
    """CPU seconds of a server so far, by its cgroup's clock (nanoseconds; /proc's 10 ms ticks where there is no
    cgroup); a server gone mid-figure is the figure's error."""
    cpu = srv.tree.cpu_s()
    if cpu is None:
        raise BenchError(f"{srv.name} (process {srv.pid}) is gone: no CPU time to read")
    return cpu


def start(name: str, *args: str, route: Route = LOOPBACK) -> process.Server:
    """A server from the registry on the server CPU, in a cgroup of its own, ready when its ready line is read;
    its transports listen at the route's address."""
    spec = servers.get(name)
    argv = route.server([spec.default_binary(), *spec.port0_at(route.address), *args])
    return process.Server(name, argv, env=dict(os.environ), cpus=SERVER_CPUS, ready_word=spec.ready_word, own_cgroup=True)


def client(argv: Sequence[str], window_s: float, cwd: Path = ROOT, route: Route = LOOPBACK) -> str:
    """Runs a client on the generator CPU to its end (at most its window plus SLACK_S); its stdout and
    stderr together. A failed exit is an error naming the client and its last output."""
    proc = process.spawn(route.client(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cpus=GEN_CPUS)
    try:
        out, _ = proc.communicate(timeout=window_s + SLACK_S)
    except subprocess.TimeoutExpired:
        process.stop(proc)
        raise BenchError(f"{Path(argv[0]).name} ran past {window_s + SLACK_S:.0f}s") from None
    finally:
        process.stop(proc, grace_s=2)
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"{Path(argv[0]).name} exited {proc.returncode}: {text[-800:]}")
    return text


@dataclass(frozen=True)
class Moved:
    """What one transfer run gave: its rate, and what the receiving side spent on each GiB of it."""

    mb_per_s: float  # 10^6 B/s
    cpu_per_gib_s: float  # the receiver's CPU seconds per GiB received, by its cgroup's clock


def iperf3(window_s: float, out_file: Path | None = None, route: Route = LOOPBACK) -> Moved:
    """TCP ceiling of the route (loopback by default) in MB/s (10^6 B/s), 1 MiB writes, and iperf3's server CPU
    per GiB received: the kernel's floor for moving those bytes into a process. With `out_file` the server writes
    what it receives there (`iperf3 -s -F FILE`), the ceiling of a disk store."""
    port = process.free_port()
    argv = ["iperf3", "-s", "-1", "-B", route.address, "-p", str(port)]
    if out_file is not None:
        argv += ["-F", str(out_file)]
    group = Cgroup.create("iperf3")
    srv = process.spawn(route.server(argv), cpus=SERVER_CPUS, stderr=subprocess.DEVNULL, group=group)
    clock = tree.of_server(srv.pid, group)
    try:
        # Poll the listening sockets, not a connection: iperf3 -s -1 would take the probe as its one test.
        process.wait_until(lambda: _listening(port, srv.pid), srv, "iperf3 -s", 10.0)
        c0 = clock.cpu_s() or 0.0
        argv = ["iperf3", "-c", route.address, "-p", str(port), "-l", "1M", "-t", f"{window_s:g}", "-J"]
        out = client(argv, window_s, route=route)
        c1 = clock.cpu_s()  # -s -1 may have ended already: its cgroup keeps the count (/proc's tree does not)
    finally:
        process.stop(srv, grace_s=5)
        if group is not None:
            group.destroy()
    received = json.loads(out)["end"]["sum_received"]
    if c1 is None:
        raise BenchError("iperf3 -s: no CPU time to read (no cgroup, and the process is gone)")
    return Moved(float(received["bits_per_second"]) / 8e6, (c1 - c0) / (float(received["bytes"]) / (1 << 30)))


def _listening(port: int, pid: int) -> bool:
    """Whether a socket listens on the port in the network namespace of process `pid` (its /proc/PID/net/tcp and
    tcp6: the runner's own /proc/net shows only its namespace)."""
    for path in procfs.TCP_TABLES:
        try:
            with open(path.replace("/proc/", f"/proc/{pid}/", 1), encoding="ascii") as f:
                text = f.read()
        except OSError:
            continue
        if any(lp == port and st == TCP_LISTEN for lp, _, st in procfs.tcp_sockets(text)):
            return True
    return False


def _driver(binary: Path, addr: str, window_s: float, *args: str, route: Route = LOOPBACK) -> dict[str, Any]:
    """One run of a Go load driver (xferload, grpcxfer): its JSON; any call it counted as an error fails the case."""
    out = client([str(binary), "--addr", addr, "--duration", f"{window_s:g}s", *args], window_s, route=route)
    r: dict[str, Any] = json.loads(out[out.index("{") :])
    if sum(r["errors"].values()):
        raise BenchError(f"{binary.name} {' '.join(args)}: errors {r['errors']}")
    return r


def xferload(addr: str, window_s: float, *args: str, route: Route = LOOPBACK) -> dict[str, Any]:
    """One xferload run (its JSON)."""
    return _driver(XFERLOAD, addr, window_s, *args, route=route)


def grpcxfer(addr: str, window_s: float, method: str) -> float:
    """MB/s (10^6 B/s) of whole gRPC transfers of GRPC_FILE_MIB files in 1 MiB chunks, 4 streams on one
    connection, every one checked (size and CRC-32)."""
    args = ("--method", method, "--file-size", f"{GRPC_FILE_MIB}MiB", "--chunk", "1MiB", "--streams", "4")
    return float(_driver(GRPCXFER, addr, window_s, *args)["mb_per_s"])


def ghz_inputs(tmp: Path) -> None:
    """echo.json (256 B) and upload.bin (the Upload stream, count-delimited binary messages) in tmp."""
    from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

    from xfer.v1 import file_transfer_pb2 as pb

    (tmp / "echo.json").write_text(json.dumps({"payload": base64.b64encode(os.urandom(256)).decode()}))
    # ghz reads its data as a Go template: no "{{" may appear, so the content has no "{" at all.
    chunk = os.urandom(1 << 20).replace(b"{", b"z")
    mib = GRPC_FILE_MIB
    msgs = [pb.UploadRequest(header=pb.UploadHeader(name="bench-8m", size=mib << 20, chunk_size=1 << 20))]
    msgs += [pb.UploadRequest(chunk=chunk)] * mib
    msgs.append(pb.UploadRequest(trailer=pb.UploadTrailer(crc32=zlib.crc32(chunk * mib))))
    with open(tmp / "upload.bin", "wb") as f:
        for m in msgs:
            b = m.SerializeToString()
            f.write(_VarintBytes(len(b)) + b)


def ghz(addr: str, window_s: float, *args: str, tls: ClientTLS | None = None) -> float:
    """Calls per second that ended OK in one ghz run, in plaintext or over TLS with `tls`'s CA and name. ghz -z
    cuts off the calls in flight at the end (Canceled / Unavailable, about one per worker); anything else is a
    broken run."""
    security = ("--cacert", str(tls.ca), "--cname", tls.server_name) if tls else ("--insecure",)
    out = client([str(GHZ), *PROTO, *security, "--format", "json", "-z", f"{window_s:g}s", *args, addr], window_s)
    r = json.loads(out[out.index("{") :])
    codes = r.get("statusCodeDistribution", {})
    bad = {k: v for k, v in codes.items() if k not in ("OK", "Canceled", "Unavailable")}
    if bad or not codes.get("OK"):
        raise BenchError(f"ghz {' '.join(args)}: {codes}, errors {r.get('errorDistribution')}")
    return float(codes["OK"]) / (float(r["total"]) / 1e9)


def locust(target: str, window_s: float, *args: str) -> float:
    """Whole operations per second of one headless Locust process (loadgen's run summary), the flags of
    scripts/studies/locust.sh."""
    out = client(
        [
            str(LOCUST),
            "-f",
            "loadgen/",
            "--headless",
            "--host",
            target,
            "--xfer-metrics-port",
            "0",
            "--only-summary",
            "-t",
            f"{window_s:g}s",
            *args,
        ],
        window_s,
    )
    for line in out.splitlines():
        words = line.split()
        if len(words) > 3 and words[0] == "operations":
            return float(words[3])
    raise BenchError(f"no Locust summary: {out[-800:]}")


@dataclass(frozen=True)
class Bulk:
    """One bulk TLS run of the anchor: its rate, and the cores each side used meanwhile (/proc's ticks: enough to
    see which side is the ceiling)."""

    mb_per_s: float  # 10^6 B/s of plaintext delivered
    sender_cores: float
    receiver_cores: float


def negotiated(addr: str, tls: ClientTLS) -> str:
    """The cipher suite a TLS listener chooses, by one handshake of Python's ssl (OpenSSL). Go's client (xferload,
    ghz) and OpenSSL's offer the same three TLS 1.3 suites and the servers choose among them by their own order
    (xferd-c prefers the server's, as does Go's server for a client that puts AES-GCM first): the same suite as
    the load gets, which a Go client checked against both servers when this was written."""
    host, port = addr.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(tls.ca))
    try:
        with (
            socket.create_connection((host, int(port)), timeout=10) as raw,
            ctx.wrap_socket(raw, server_hostname=tls.server_name) as s,
        ):
            found = s.cipher()
    except OSError as e:  # ssl.SSLError is one
        raise BenchError(f"TLS handshake with {addr}: {e}") from None
    if found is None or found[1] != "TLSv1.3":
        raise BenchError(f"{addr} negotiated {found}, not TLS 1.3: the anchor speaks TLS 1.3 only")
    return found[0]


def tls_bulk(window_s: float, cert: Path, key: Path, tls: ClientTLS, suite: str, tmp: Path) -> Bulk:
    """Bulk TLS 1.3 over loopback with one cipher suite: socat reading /dev/zero and SSL_writing it into one
    connection, its peer SSL_reading into /dev/null, on the server and generator CPUs as a case's server and
    client. What it measures is the floor of moving bytes through TLS: OpenSSL's record layer and AES-GCM (the
    library xferd-c uses) and loopback TCP, with no protocol, no framing and no store. The sender's core is the
    ceiling (about 1.0 core against the receiver's 0.7 when this was written: on loopback the sender also pays
    the receiver's TCP work, as with iperf3); its reads are no limit (16 KiB and SOCAT_BUF gave the same rate:
    OpenSSL cuts any write into 16 KiB records), unlike openssl s_client's interactive stdin loop. socat 1.7 has
    no option for TLS 1.3 suites: an OpenSSL config file of its own (OPENSSL_CONF) sets it, and the receiver's
    log says which suite the handshake chose, checked. The rate is the plaintext the receiver wrote to
    /dev/null over window_s, from its first byte."""
    conf = tmp / f"openssl-{suite}.cnf"
    conf.write_text(
        "openssl_conf = conf\n[conf]\nssl_conf = ssl\n[ssl]\nsystem_default = tls\n"
        f"[tls]\nMinProtocol = TLSv1.3\nCiphersuites = {suite}\n"
    )
    env = {**os.environ, "OPENSSL_CONF": str(conf)}
    port = process.free_port()
    buf = ("-b", str(SOCAT_BUF))
    listen = f"OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,cert={cert},key={key},verify=0"
    log = tmp / "socat-receiver.log"
    with open(log, "wb") as err:
        rx = process.spawn(
            ["socat", "-d", "-d", "-u", *buf, listen, "OPEN:/dev/null"], env=env, stderr=err, cpus=SERVER_CPUS
        )
    tx: subprocess.Popen[bytes] | None = None
    try:
        process.wait_until(lambda: _listening(port, rx.pid), rx, "socat OPENSSL-LISTEN", 10.0)
        tx = process.spawn(
            ["socat", "-u", *buf, "OPEN:/dev/zero", f"OPENSSL:127.0.0.1:{port},cafile={tls.ca}"],
            env=env,
            stderr=subprocess.DEVNULL,
            cpus=GEN_CPUS,
        )
        process.wait_until(lambda: _delivered(rx.pid, log) > 0, rx, "socat's first TLS bytes", 10.0)
        w0, c0, t0 = _delivered(rx.pid, log), _cores_s(rx.pid, tx.pid), time.monotonic()
        time.sleep(window_s)  # the measured window itself
        w1, c1, t1 = _delivered(rx.pid, log), _cores_s(rx.pid, tx.pid), time.monotonic()
        if tx.poll() is not None:
            raise BenchError(f"socat's TLS sender exited {tx.returncode} within the window")
    finally:
        if tx is not None:
            process.stop(tx, grace_s=2)
        process.stop(rx, grace_s=2)
    said = log.read_text(errors="replace")
    if f"SSL connection using {suite}" not in said:
        raise BenchError(f"socat's handshake did not use {suite}: {said[-600:]}")
    dt = t1 - t0
    return Bulk((w1 - w0) / dt / 1e6, (c1[1] - c0[1]) / dt, (c1[0] - c0[0]) / dt)


def _delivered(pid: int, log: Path) -> int:
    """Bytes the receiving socat has written to /dev/null so far: all it passed to write(2) (/proc/PID/io
    wchar) less its log's."""
    try:
        with open(f"/proc/{pid}/io", encoding="ascii") as f:
            wchar = next(int(line.split()[1]) for line in f if line.startswith("wchar:"))
        return wchar - log.stat().st_size
    except (OSError, StopIteration):
        raise BenchError(f"socat (process {pid}): no /proc/{pid}/io to read") from None


def _cores_s(*pids: int) -> tuple[float, ...]:
    """CPU seconds of each process so far."""
    got = tuple(procfs.cpu_seconds(p) for p in pids)
    if any(c is None for c in got):
        raise BenchError(f"socat gone mid-window (processes {pids})")
    return tuple(c or 0.0 for c in got)
