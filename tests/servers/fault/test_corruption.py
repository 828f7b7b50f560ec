"""Corrupted bytes on the wire: py_client and Locust must notice, through the CRC-32 of the whole file.

tests/support/corrupt_proxy.py flips one byte inside the data of one Read response (frame protocol; both
servers serve it). py_client's download raises `data_loss` from its check of the assembled file against the
server's CRC-32; Locust with `--xfer-verify on` counts the mismatch and `--xfer-check failures==0` exits 3.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from py_client import XferError, connect
from py_client.content import gen_bytes
from tests.loadgen.support import parse_prom, run_locust, total
from tests.support.corrupt_proxy import CorruptProxy
from tests.support.pool import ServerPool
from tests.support.servers import SERVERS, RunningServer, selected_servers

FRAME_SERVERS = [s for s in selected_servers() if "frame" in SERVERS[s].transports]
CHUNK = 64 << 10
DATA = gen_bytes(5 * CHUNK + 7, 11)
EXIT_CHECK_FAILED = 3  # loadgen: an --xfer-check condition failed


@pytest.fixture(params=FRAME_SERVERS)
def server(request: pytest.FixtureRequest, pool: ServerPool) -> RunningServer:
    return pool.get(request.param)


@pytest.mark.timeout(60)
def test_py_client_raises_data_loss(server: RunningServer) -> None:
    name = "corrupt-me.bin"
    with connect(server.target("frame"), timeout=20) as c:
        c.upload(name, DATA, chunk_size=CHUNK)
    with CorruptProxy(server.addr("frame"), limit=1) as proxy, connect(proxy.target, timeout=20) as c:
        with pytest.raises(XferError) as err:
            c.download(name, chunk_size=CHUNK)
        assert err.value.code == "data_loss" and "crc32 mismatch" in err.value.message, err.value
        assert proxy.flipped == 1
        # The proxy is spent (limit 1): the same client, on the same path, now gets the file whole.
        assert c.download(name, chunk_size=CHUNK).data == DATA
    with connect(server.target("frame"), timeout=20) as c:
        st = c.stat(name)
        assert c.download(name, chunk_size=CHUNK).data == DATA and st.size == len(DATA)


@pytest.mark.timeout(90)
def test_locust_counts_the_mismatch_and_fails_its_check(server: RunningServer, tmp_path: Path) -> None:
    with CorruptProxy(server.addr("frame"), limit=1) as proxy:
        r = run_locust([
            "--headless", "--host", proxy.target, "-u", "2", "-r", "2", "-t", "3s",
            "--xfer-mix", "download:1", "--xfer-sizes", "192KiB", "--xfer-chunk", str(CHUNK),
            "--xfer-verify", "on", "--xfer-metrics-port", "0", "--xfer-metrics-dump", str(tmp_path),
            "--xfer-check", "failures==0", "--only-summary",
        ], timeout=60)
        flipped = proxy.flipped
    assert flipped == 1
    assert r.returncode == EXIT_CHECK_FAILED, r.stderr[-3000:]
    assert "xfer-check FAIL: failures==0" in r.stderr
    (dump,) = tmp_path.glob("local-*.prom")
    samples = parse_prom(dump.read_text())
    assert total(samples, "xfer_client_verifications_total", method="Download", result="mismatch") == 1
    assert total(samples, "xfer_client_errors_total", method="Download", code="data_loss") == 1
    assert total(samples, "xfer_client_verifications_total", method="Download", result="ok") > 0
