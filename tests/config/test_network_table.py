"""[network]: latency, jitter and bandwidth parse in the experiment grammar's units; malformed values are
refused naming the key and what it accepts; the toxics Toxiproxy gets follow from them."""

from __future__ import annotations

import pytest

from tests.config.test_schema import BASE, parse, refused
from xferbench.run.toxiproxy import network_toxics


def test_network_parses_and_maps_to_toxics() -> None:
    e = parse(BASE + '[network]\nlatency = "20ms"\njitter = "5ms"\nbandwidth = "100MiB/s"\n')
    assert e.network is not None
    assert (e.network.latency_ms, e.network.jitter_ms, e.network.bandwidth) == (20, 5, 100 << 20)
    assert e.network.describe() == ("toxiproxy between Locust and the server: +20 ms ± 5 ms per round trip, "
                                    "100 MiB/s per connection each way")
    toxics = {(t.type, t.stream): t.attributes for t in network_toxics(e.network)}
    # Latency once per round trip (responses only); bandwidth in Toxiproxy's 1000 B/s units, both ways.
    assert toxics == {
        ("latency", "downstream"): {"latency": 20, "jitter": 5},
        ("bandwidth", "upstream"): {"rate": (100 << 20) // 1000},
        ("bandwidth", "downstream"): {"rate": (100 << 20) // 1000},
    }


def test_network_is_optional_and_each_key_alone() -> None:
    assert parse(BASE).network is None
    assert parse(BASE + "[network]\nlatency = 0.02\n").network.latency_ms == 20  # type: ignore[union-attr]
    only_bw = parse(BASE + '[network]\nbandwidth = "800000/s"\n').network
    assert only_bw is not None and only_bw.bandwidth == 800_000 and only_bw.latency_ms == 0
    assert [t.type for t in network_toxics(only_bw)] == ["bandwidth", "bandwidth"]


@pytest.mark.parametrize(("table", "needles"), [
    ("", ["network: empty table"]),
    ('lat = "20ms"', ["network.lat: unknown key", "latency, jitter, bandwidth"]),
    ('latency = "fast"', ["network.latency = 'fast'", '"20ms"']),
    ('latency = "-5ms"', ["network.latency = '-5ms'"]),
    ('latency = "500us"', ["network.latency = '500us'", "whole milliseconds"]),
    ('jitter = "5ms"', ["network.jitter", "needs network.latency"]),
    ('latency = "20ms"\njitter = "30ms"', ["network.jitter = '30ms'", "at most network.latency (20 ms)"]),
    ('bandwidth = "100MiB"', ["network.bandwidth = '100MiB'", '"100MiB/s"']),
    ('bandwidth = "fast/s"', ["network.bandwidth = 'fast/s'", "KiB, MiB or GiB"]),
    ("bandwidth = 1000", ["network.bandwidth = 1000", '"100MiB/s"']),
    ('bandwidth = "10/s"', ["network.bandwidth = '10/s'", "at least 1000/s"]),
], ids=["empty", "unknown-key", "latency-word", "latency-negative", "latency-sub-ms", "jitter-alone",
        "jitter-over-latency", "bandwidth-no-per-s", "bandwidth-word", "bandwidth-number", "bandwidth-tiny"])
def test_network_refused(table: str, needles: list[str]) -> None:
    refused(BASE + "[network]\n" + table + "\n", needles)


def test_network_must_be_a_table() -> None:
    refused('network = "20ms"\n' + BASE, ["network: expected a table"])
