"""`--metrics on|off` (XFERD_METRICS): with instrumentation off, no call is counted or timed and /metrics keeps
only what is read at scrape time (build info, gauges, process and allocator figures) and says so with
`xfer_instrumentation_enabled 0`; with it on (the default), every call is counted exactly once.

Each test starts the real xferd-c and makes real calls over its frame port (servers/c/README.md, "Metrics")."""

from __future__ import annotations

import os
import re
import subprocess
import zlib
from pathlib import Path

from tests.servers.c.test_xferd_c import NAME, FrameConn, binary, metric_value, scrape
from tests.support.servers import RunningServer, running_server
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2 as fr

ECHOES = 37
CHUNK = 4096
CHUNKS = 5
PER_CALL_FAMILIES = ("xfer_requests_total", "xfer_request_duration_seconds", "xfer_transfer_bytes_total",
                     "xfer_buffer_pool_gets_total", "xfer_buffer_pool_news_total", "xfer_alloc_duration_seconds",
                     "xfer_alloc_failures_total")
SCRAPE_TIME_FAMILIES = ("xfer_build_info", "xfer_connections", "xfer_connections_accepted_total",
                        "xfer_inflight_requests",
                        "process_resident_memory_bytes", "process_cpu_seconds_total")


def make_calls(server: RunningServer) -> int:
    """ECHOES Echo calls and one upload of CHUNKS chunks (begin, chunks, commit); returns the bytes uploaded."""
    conn = FrameConn(server.addr("frame"))
    for seq in range(1, ECHOES + 1):
        r = conn.call("Echo", ft.EchoRequest(payload=b"e" * 256), ft.EchoResponse, seq=seq)
        assert r.payload == b"e" * 256
    data = os.urandom(CHUNK * CHUNKS)
    begin = conn.call("UploadBegin", fr.UploadBeginRequest(name="m.bin", size=len(data), chunk_size=CHUNK),
                      fr.UploadBeginResponse)
    for i in range(CHUNKS):
        chunk = fr.UploadChunkRequest(upload_id=begin.upload_id, offset=i * CHUNK, data=data[i * CHUNK:(i + 1) * CHUNK])
        assert conn.call("UploadChunk", chunk, fr.UploadChunkResponse).received == (i + 1) * CHUNK
    commit = conn.call("UploadCommit", fr.UploadCommitRequest(upload_id=begin.upload_id, crc32=zlib.crc32(data)),
                       fr.UploadCommitResponse)
    assert commit.size == len(data)
    conn.close()
    return len(data)


def families(text: str) -> set[str]:
    """The metric families the exposition declares (# TYPE lines)."""
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def test_metrics_off_records_nothing_per_call(tmp_path: Path) -> None:
    with running_server(NAME, ["--metrics=off", f"--store=disk:{tmp_path}"]) as s:
        assert s.ready["instrumentation"] == "off"
        make_calls(s)
        text = scrape(s)
        assert metric_value(text, "xfer_instrumentation_enabled") == 0
        declared = families(text)
        assert not declared & set(PER_CALL_FAMILIES), f"per-call families served with --metrics off: {declared}"
        per_call = r"^xfer_(requests_total|request_duration|transfer_bytes|buffer_pool|alloc_duration|alloc_failures)"
        assert not re.search(per_call, text, re.M), text
        assert set(SCRAPE_TIME_FAMILIES) <= declared, f"missing with --metrics off: {set(SCRAPE_TIME_FAMILIES) - declared}"
        assert 'xfer_build_info{server="xferd-c",' in text


def test_metrics_off_from_the_environment(tmp_path: Path) -> None:
    with running_server(NAME, [f"--store=disk:{tmp_path}"], env={"XFERD_METRICS": "off"}) as s:
        assert s.ready["instrumentation"] == "off"
        assert metric_value(scrape(s), "xfer_instrumentation_enabled") == 0


def test_metrics_on_counts_every_call_exactly(tmp_path: Path) -> None:
    with running_server(NAME, [f"--store=disk:{tmp_path}"]) as s:
        assert s.ready["instrumentation"] == "on"
        uploaded = make_calls(s)
        text = scrape(s)
        assert metric_value(text, "xfer_instrumentation_enabled") == 1
        assert set(PER_CALL_FAMILIES) | set(SCRAPE_TIME_FAMILIES) <= families(text)
        frame = 'transport="frame",method='
        assert metric_value(text, f'xfer_requests_total{{{frame}"Echo",code="ok"}}') == ECHOES
        assert metric_value(text, f'xfer_requests_total{{{frame}"UploadChunk",code="ok"}}') == CHUNKS
        assert metric_value(text, f'xfer_requests_total{{{frame}"UploadBegin",code="ok"}}') == 1
        assert metric_value(text, f'xfer_requests_total{{{frame}"UploadCommit",code="ok"}}') == 1
        assert metric_value(text, f'xfer_request_duration_seconds_count{{{frame}"Echo"}}') == ECHOES
        assert metric_value(text, f'xfer_request_duration_seconds_bucket{{{frame}"Echo",le="+Inf"}}') == ECHOES
        assert metric_value(text, 'xfer_transfer_bytes_total{direction="upload"}') == uploaded
        assert metric_value(text, "xfer_buffer_pool_gets_total") > 0


def test_bad_metrics_value_is_refused_naming_it() -> None:
    r = subprocess.run([binary(), "--metrics", "maybe"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--metrics maybe" in r.stderr and "on or off" in r.stderr, r.stderr
