"""The `tls` case of `make bench`: what TLS leaves of each server's share of its ceiling. Frame uploads to every
frame server's TLS listener ÷ bulk TLS over loopback with the cipher suite that server negotiates (socat,
tools.tls_bulk), and Locust's gRPC Echo over TLS ÷ ghz's over TLS against xferd-go's TLS listener, the plaintext
`generators` case's "locust echo / ghz" over TLS. One throwaway CA and server certificate per sitting (the
runner's, xferbench/run/tlsfiles.py, under the sitting's tmp); tickets off and clients that do not resume: these
loads hold their connections, so a handshake is a fixed cost outside the window either way."""

from __future__ import annotations

from xferbench.config import servers, tls
from xferbench.config.tls import ClientTLS, TLSFiles
from xferbench.run import process, tlsfiles
from xferbench.tools.bench import tools
from xferbench.tools.bench.cases import FRAME, FRAME_SERVERS, GRPC_SERVER, Ctx, ordered

# The frame servers with a TLS listener for frames, in name order; the full gRPC server, if it has one for gRPC.
TLS_FRAME_SERVERS = tuple(n for n in FRAME_SERVERS if "frame" in servers.get(n).tls_transports)
TLS_GRPC_SERVER = GRPC_SERVER if "grpc" in servers.get(GRPC_SERVER).tls_transports else None
MODE = "on"  # tls.py's: tickets off, no resumption


def tls_case(ctx: Ctx, r: int) -> None:
    """Every frame server's TLS upload beside its own anchor, anchor first in odd rounds and last in even ones;
    then the Echo figure. --smoke: the first frame server's upload only."""
    files = tlsfiles.ensure(ctx.tmp)
    client = tls.client(MODE, files)
    assert client is not None  # MODE is not "off"
    for name in ordered(r, TLS_FRAME_SERVERS[:1] if ctx.smoke else TLS_FRAME_SERVERS):
        _frame_upload(ctx, r, name, files, client)
    if TLS_GRPC_SERVER is not None and not ctx.smoke:
        _echo(ctx, r, TLS_GRPC_SERVER, files, client)


def _start(name: str, transport: str, files: TLSFiles) -> tuple[process.Server, str]:
    """The server with its memory store and its TLS listener for `transport`; the listener's address."""
    spec = servers.get(name)
    flags = [*(["--store=mem"] if "store" in spec.flags else [])]
    srv = tools.start(name, *flags, *spec.tls_argv(transport, str(files.cert), str(files.key), tls.tickets(MODE)))
    return srv, srv.addr(spec.tls_listener(transport))


def _frame_upload(ctx: Ctx, r: int, name: str, files: TLSFiles, client: ClientTLS) -> None:
    """xferload's uploads over TLS (the plaintext `frame` case's shape) ÷ socat's bulk TLS with the suite this
    server chose, both MB/s over one window each."""
    w = ctx.window_s
    srv, addr = _start(name, "frame", files)
    try:
        suite = tools.negotiated(addr, client)
        anchor = tools.tls_bulk(w, files.cert, files.key, client, suite, ctx.tmp) if r % 2 else None
        tls_args = ("--tls-ca", str(client.ca), "--tls-server-name", client.server_name, "--tls-resume", client.resume)
        out = tools.xferload(addr, w, "--method", "upload", *FRAME, *tls_args)
    finally:
        srv.stop()
    if int(out["calls"]) <= 0 or not out["bytes"]:
        raise tools.BenchError(f"xferload over TLS to {name} moved nothing")
    anchor = anchor or tools.tls_bulk(w, files.cert, files.key, client, suite, ctx.tmp)
    ctx.say(
        f"socat {suite}: {anchor.mb_per_s:.0f} MB/s, sender {anchor.sender_cores:.2f} cores, receiver"
        f" {anchor.receiver_cores:.2f}; {name}: {float(out['mb_per_s']):.0f} MB/s"
    )
    ctx.add(f"tls frame upload {name} / socat ({suite})", float(out["mb_per_s"]) / anchor.mb_per_s)


def _echo(ctx: Ctx, r: int, name: str, files: TLSFiles, client: ClientTLS) -> None:
    """Echo 256 B over TLS, 16 Locust users (a connection each) ÷ ghz -c 16 (one connection), as in plaintext."""
    w = ctx.window_s
    srv, addr = _start(name, "grpc", files)
    rate: dict[str, float] = {}
    try:
        for gen in ordered(r, ("ghz", "locust")):
            if gen == "ghz":
                echo = ("--call", "xfer.v1.FileTransfer.Echo", "-D", str(ctx.tmp / "echo.json"), "-c", "16")
                rate[gen] = tools.ghz(addr, w, *echo, tls=client)
            else:
                load = ("-u", "16", "-r", "16", "--xfer-mix", "echo:1", "--xfer-echo-size", "256")
                tls_opts = ("--xfer-tls-ca", str(client.ca), "--xfer-tls-server-name", client.server_name)
                rate[gen] = tools.locust(f"grpc://{addr}", w, *load, *tls_opts, "--xfer-tls-resume", client.resume)
    finally:
        srv.stop()
    ctx.add("locust tls echo / ghz tls", rate["locust"] / rate["ghz"])
