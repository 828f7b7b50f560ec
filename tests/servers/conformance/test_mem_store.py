"""The same operations against the in-memory store (the rest of the suite uses disk stores)."""

from __future__ import annotations

import os

import pytest

from py_client import XferError, connect
from py_client.content import crc32, gen_bytes
from tests.support.pool import module_pool
from tests.support.servers import RunningServer

pool = module_pool(store="mem")


def test_mem_store_round_trip(target: str, pair: tuple[str, str]) -> None:
    with connect(target, inflight=4) as c:
        for size in (0, 1, 65535, 65536, 65537, 3 << 20):
            data = os.urandom(size)
            name = f"mem-{size}-{pair[1]}"
            assert c.upload(name, data, chunk_size=65536).crc32 == crc32(data)
            assert c.download(name, chunk_size=65536).data == data
            assert c.stat(name).size == size
        assert c.download("gen:2000000:3").data == gen_bytes(2000000, 3)
        with pytest.raises(XferError) as info:
            c.stat("never-there")
        assert info.value.code == "not_found"


def test_mem_store_is_really_mem(live: RunningServer) -> None:
    assert live.ready.get("store") == "mem"
