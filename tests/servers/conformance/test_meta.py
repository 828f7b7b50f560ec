"""Meta (PROTOCOL.md "Meta") on every server and transport: the answer is the entries sorted by key with
their digest (the clients check both), and each limit is refused with invalid_argument naming it."""

from __future__ import annotations

import random
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from py_client import FrameClient, GrpcClient, XferError, meta
from tests.support.servers import RunningServer

Client = GrpcClient | FrameClient
MAX_ENTRIES = 1024  # the servers' default --max-meta-entries
SCRAPE_TIMEOUT_S = 10.0


def refused(client: Client, entries: list[tuple[str, str]]) -> str:
    with pytest.raises(XferError) as info:
        client.meta(entries)
    assert info.value.code == "invalid_argument", str(info.value)
    return info.value.message


@pytest.mark.parametrize("count", [0, 1, 2, 64, MAX_ENTRIES], ids=["0", "1", "2", "64", "max"])
def test_entries_come_back_sorted_with_their_digest(client: Client, count: int) -> None:
    entries = meta.random_entries(count, 1, 64, random.Random(count))
    got = client.meta(entries)  # raises data_loss unless sorted and the digest matches
    assert got == meta.sorted_entries(entries)
    assert len(got) == count


def test_longest_key_and_value_and_unicode(client: Client) -> None:
    entries = [("k" * 256, "v" * 4096), ("\u00e9t\u00e9", "\u2603"), ("Z", ""), ("a", "x")]
    assert [k for k, _ in client.meta(entries)] == ["Z", "a", "k" * 256, "\u00e9t\u00e9"]  # bytewise order


def test_over_the_entry_limit(client: Client) -> None:
    entries = meta.random_entries(MAX_ENTRIES + 1, 4, 8, random.Random(7))
    msg = refused(client, entries)
    assert f"{MAX_ENTRIES + 1} entries exceed limit {MAX_ENTRIES}" in msg and "--max-meta-entries" in msg


@pytest.mark.parametrize(("entries", "named"), [
    ([("a", "1"), ("k" * 257, "v")], "entry 1 key length 257 is outside 1..256"),
    ([("", "v")], "entry 0 key length 0 is outside 1..256"),
    ([("k", "v" * 4097)], "entry 0 value length 4097 exceeds limit 4096"),
    ([("a\0b", "v")], "entry 0 key contains NUL"),
    ([("a", "v"), ("b", "\0")], "entry 1 value contains NUL"),
    ([("a", "1"), ("b", "2"), ("a", "3")], 'duplicate key "a"'),
], ids=["long-key", "empty-key", "long-value", "nul-key", "nul-value", "duplicate"])
def test_bad_entries_are_refused_naming_what(client: Client, entries: list[tuple[str, str]], named: str) -> None:
    assert named in refused(client, entries)


def test_the_connection_serves_on_after_a_refusal(client: Client) -> None:
    refused(client, [("a", "1"), ("a", "1")])
    assert client.meta([("b", "2"), ("a", "1")]) == [("a", "1"), ("b", "2")]


def test_meta_calls_are_counted(client: Client, live: RunningServer, pair: tuple[str, str]) -> None:
    def count(code: str) -> float:
        with urllib.request.urlopen(live.metrics_url, timeout=SCRAPE_TIMEOUT_S) as r:
            text = r.read().decode()
        want = {"transport": pair[1], "method": "Meta", "code": code}
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == "xfer_requests_total" and s.labels == want)

    ok0, bad0 = count("ok"), count("invalid_argument")
    client.meta([("a", "1")])
    refused(client, [("", "")])
    assert count("ok") == ok0 + 1
    assert count("invalid_argument") == bad0 + 1
