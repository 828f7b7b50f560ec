"""`python -m py_client upload|download|echo|stat|meta`: one JSON object per line, non-zero exit on failure.

Keys: op, ok, bytes, crc32, seconds, error. Bad arguments exit 2 with an argparse message.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from py_client import TLSOptions, XferError, connect, meta, parse_target
from py_client.durations import DURATION_HELP, parse_duration
from py_client.sizes import SIZE_HELP, parse_size


class _Discard:
    """A sink for download without --out: the bytes are verified, not kept."""

    def write(self, data: bytes) -> int:
        return len(data)


def _target(text: str) -> str:
    try:
        parse_target(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _size(lo: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return parse_size(text, lo=lo)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = "size"
    return parse


def _timeout(text: str) -> float:
    try:
        v = parse_duration(text, what="timeout")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"timeout {text!r}: want a positive duration")
    return v


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m py_client",
                                     description="Talk to an xfer server over grpc:// or frame://.")
    sub = parser.add_subparsers(dest="op", required=True, metavar="{upload,download,echo,stat,meta}")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--target", required=True, type=_target,
                       help="grpc://host:port or frame://host:port")
        p.add_argument("--timeout", type=_timeout, default=60.0, metavar="DURATION",
                       help=f"per call: {DURATION_HELP} (default 60)")
        p.add_argument("--tls-ca", type=Path, metavar="FILE",
                       help="speak TLS, trusting the PEM certificates in FILE (the target is a TLS listener)")
        p.add_argument("--tls-server-name", metavar="NAME",
                       help="with --tls-ca: the name the server's certificate must carry (default: the target's host)")
        p.add_argument("--tls-resume", choices=("on", "off"),
                       help="with --tls-ca: resume the TLS session on a new connection (default on)")

    up = sub.add_parser("upload", help="upload a file")
    common(up)
    up.add_argument("--name", required=True, help="name on the server")
    up.add_argument("--file", required=True, type=Path, help="local file to upload")
    up.add_argument("--chunk", type=_size(1), default=1 << 20, metavar="SIZE",
                    help=f"chunk size: {SIZE_HELP} (default 1MiB)")

    down = sub.add_parser("download", help="download a file (verified by CRC-32)")
    common(down)
    down.add_argument("--name", required=True, help="name on the server (gen:<size>:<seed> too)")
    down.add_argument("--out", type=Path, help="write here (only once verified); default: discard")
    down.add_argument("--chunk", type=_size(1), default=1 << 20, metavar="SIZE",
                      help=f"chunk size: {SIZE_HELP} (default 1MiB)")

    echo = sub.add_parser("echo", help="echo a payload of SIZE")
    common(echo)
    echo.add_argument("--size", required=True, type=_size(0), metavar="SIZE", help=f"payload size: {SIZE_HELP}")

    stat = sub.add_parser("stat", help="a file's size and CRC-32")
    common(stat)
    stat.add_argument("--name", required=True)

    md = sub.add_parser("meta", help="send ENTRIES random key/value entries; check the sorted answer and digest")
    common(md)
    md.add_argument("--entries", type=int, default=64, help="entries per call (default 64)")
    md.add_argument("--entry-size", type=_size_range, default=(8, 64), metavar="MIN-MAX",
                    help="bytes per key and value (default 8-64)")
    md.add_argument("--seed", type=int, default=1, help="random seed of the entries (default 1)")
    return parser


def _size_range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    try:
        pair = (int(lo), int(hi if sep else lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want MIN-MAX in bytes, e.g. 8-64") from None
    if not 0 <= pair[0] <= pair[1] <= 4096:
        raise argparse.ArgumentTypeError(f"{text!r}: want 0 <= MIN <= MAX <= 4096")
    return pair


def _tls_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TLSOptions | None:
    """The --tls-* arguments, the CA file read once here so that a bad one is an argument error."""
    if args.tls_ca is None:
        if args.tls_server_name is not None or args.tls_resume is not None:
            parser.error("argument --tls-server-name/--tls-resume: only with --tls-ca")
        return None
    tls = TLSOptions(args.tls_ca, args.tls_server_name, args.tls_resume != "off")
    try:
        tls.context()
    except ValueError as e:
        parser.error(f"argument --tls-ca: {e}")
    return tls


def _line(op: str, ok: bool, nbytes: int | None, crc: int | None, seconds: float | None,
          error: str | None) -> dict[str, Any]:
    return {"op": op, "ok": ok, "bytes": nbytes, "crc32": crc, "seconds": seconds, "error": error}


def _download_to(client: Any, name: str, out: Path, chunk: int) -> Any:
    """Downloads into a temp file beside `out` and renames it only once the CRC-32 has verified."""
    folder = out.parent if str(out.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            result = client.download(name, chunk_size=chunk, out=f, verify=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    op: str = args.op
    t0 = time.perf_counter()
    with connect(args.target, timeout=args.timeout, tls=args.tls) as client:
        if op == "upload":
            r = client.upload(args.name, path=args.file, chunk_size=args.chunk)
            return _line(op, True, r.bytes, r.crc32, r.seconds, None)
        if op == "download":
            if args.out is not None:
                r = _download_to(client, args.name, args.out, args.chunk)
            else:
                r = client.download(args.name, chunk_size=args.chunk, out=_Discard(), verify=True)  # type: ignore[arg-type]
            return _line(op, True, r.bytes, r.crc32, r.seconds, None)
        if op == "echo":
            payload = os.urandom(args.size)
            got = client.echo(payload)
            seconds = time.perf_counter() - t0
            if got != payload:
                raise XferError("data_loss", f"echo returned {len(got)} bytes that differ from the "
                                             f"{len(payload)} sent")
            return _line(op, True, len(got), zlib.crc32(got), seconds, None)
        if op == "meta":
            lo, hi = args.entry_size
            entries = meta.random_entries(args.entries, lo, hi, random.Random(args.seed))
            answer: list[tuple[str, str]] = client.meta(entries)  # checks order and digest
            nbytes = sum(len(k.encode()) + len(v.encode()) for k, v in answer)
            return _line(op, True, nbytes, meta.digest(answer), time.perf_counter() - t0, None)
        st = client.stat(args.name)
        return _line(op, True, st.size, st.crc32, time.perf_counter() - t0, None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.op == "upload" and not args.file.is_file():
        parser.error(f"argument --file: {str(args.file)!r} is not a readable file")
    if args.op == "download" and args.out is not None and args.out.is_dir():
        parser.error(f"argument --out: {str(args.out)!r} is a directory")
    if args.timeout <= 0:
        parser.error(f"argument --timeout: {args.timeout} must be positive")
    args.tls = _tls_options(parser, args)
    t0 = time.perf_counter()
    try:
        line = run(args)
    except XferError as e:
        line = _line(args.op, False, None, None, time.perf_counter() - t0, str(e))
    except OSError as e:
        line = _line(args.op, False, None, None, time.perf_counter() - t0, f"unavailable: {e}")
    print(json.dumps(line), flush=True)
    return 0 if line["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
