"""xferbench.measure.hoststat against this machine's own /proc: the parsers on the files as this kernel writes them,
checked against another reading of the same counters (the aggregate cpu line, sysfs, a loopback connection's
segments); a window of two samples whose CPU time adds up to the CPUs it may use; and what is missing or went
backwards said so, never as zeros."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from xferbench.measure import hoststat


def proc(name: str) -> str:
    return Path("/proc", name).read_text()


def test_cpu_seconds_of_every_cpu_add_up_to_the_aggregate_line() -> None:
    text = proc("stat")
    first = text.splitlines()[0].split()
    assert first[0] == "cpu"
    aggregate = dict(zip(hoststat.CPU_FIELDS, (int(v) / hoststat.HZ for v in first[1:]), strict=False))
    cpus = [int(w.split()[0][3:]) for w in text.splitlines() if w.startswith("cpu") and w[3].isdigit()]
    mine = hoststat.cpu_seconds(text, cpus)
    for k in hoststat.CPU_FIELDS:  # the kernel sums the per-CPU counters again for that line: a few ticks apart
        assert mine[k] == pytest.approx(aggregate[k], abs=len(cpus) * 5 / hoststat.HZ), k
    (one,) = [ln.split() for ln in text.splitlines() if ln.startswith(f"cpu{cpus[0]} ")]
    assert hoststat.cpu_seconds(text, [cpus[0]])["system"] == int(one[3]) / hoststat.HZ  # one CPU: its line alone


def test_a_cpu_without_a_line_or_a_short_line_is_an_error_naming_it() -> None:
    text = proc("stat")
    with pytest.raises(ValueError, match="no line for CPU 4096"):
        hoststat.cpu_seconds(text, [0, 4096])
    with pytest.raises(ValueError, match=r"cpu0: 3 values, expected at least 8"):
        hoststat.cpu_seconds("cpu0 1 2 3\n", [0])


def test_net_counters_are_every_interface_but_lo_and_those_left_out() -> None:
    text = proc("net/dev")
    names = [ln.split(":")[0].strip() for ln in text.splitlines()[2:]]
    got = hoststat.net_counters(text, skip=lambda name: False)
    assert "lo" in names and "lo" not in got and sorted(got) == sorted(n for n in names if n != "lo")
    for name, (rx_bytes, rx_packets, tx_bytes, tx_packets) in got.items():
        stats = Path("/sys/class/net", name, "statistics")  # the same counters, read after: never behind
        if stats.is_dir():
            assert int((stats / "rx_bytes").read_text()) >= rx_bytes, name
            assert int((stats / "tx_packets").read_text()) >= tx_packets, name
        assert rx_packets <= rx_bytes and tx_packets <= tx_bytes  # no packet is empty
    some = next(iter(got), None)
    if some is not None:
        assert some not in hoststat.net_counters(text, skip=lambda name: name == some)
    with pytest.raises(ValueError, match=r"eth9: 3 values, expected 16"):
        hoststat.net_counters("h\nh\n  eth9: 1 2 3\n")


def test_tcp_counters_count_a_loopback_connection_s_segments() -> None:
    before = hoststat.tcp_counters(proc("net/snmp"))
    with socket.create_server(("127.0.0.1", 0)) as srv:
        c = socket.create_connection(srv.getsockname())
        s, _ = srv.accept()
        with c, s:
            for _ in range(20):  # one segment at least each way per exchange
                c.sendall(b"x")
                s.recv(1)
                s.sendall(b"y")
                c.recv(1)
    after = hoststat.tcp_counters(proc("net/snmp"))
    assert after["out_segs"] - before["out_segs"] >= 40  # this network namespace's: others' segments only add
    assert after["retrans_segs"] >= before["retrans_segs"]
    with pytest.raises(ValueError, match="no Tcp: lines"):
        hoststat.tcp_counters("Ip: Forwarding\nIp: 1\n")
    with pytest.raises(ValueError, match="no RetransSegs"):
        hoststat.tcp_counters("Tcp: OutSegs\nTcp: 5\n")


def test_a_window_of_two_samples_adds_up_to_its_cpus() -> None:
    a = hoststat.sample()
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # some CPU time of our own, so that busy is not 0 by chance
        sum(range(1000))
    b = hoststat.sample()
    w = hoststat.window(a, b)
    assert w["span_s"] == pytest.approx(b["mono"] - a["mono"], abs=0.001) and w["span_s"] >= 0.3
    cpu = w["cpu"]
    assert cpu["cpus"] == len(os.sched_getaffinity(0))
    total = sum(cpu[k] for k in hoststat.CPU_SHOWN)
    # each CPU counts every tick somewhere: the CPUs' count, give or take a few ticks over the span
    assert total == pytest.approx(cpu["cpus"], abs=0.15 * cpu["cpus"] + 3 / hoststat.HZ / w["span_s"]), cpu
    assert cpu["busy"] > 0 and cpu["busy"] == pytest.approx(total - cpu["idle"] - cpu["iowait"], abs=1e-3)
    assert all(cpu[k] >= 0 for k in hoststat.CPU_SHOWN)
    net, tcp = w["net"], w["tcp"]
    assert "error" not in net and "error" not in tcp, w
    assert all(net[k] >= 0 and net[f"{k}_per_s"] >= 0 for k in hoststat.NET_FIELDS)
    assert tcp["retrans_segs"] >= 0 and tcp["out_segs"] >= 0


def test_what_could_not_be_read_or_went_backwards_is_an_error_not_a_zero() -> None:
    a, b = hoststat.sample(), hoststat.sample()
    b["mono"] = a["mono"] + 1.0
    w = hoststat.window({**a, "tcp": {"error": "/proc/net/snmp: [Errno 2] No such file"}}, b)
    assert w["tcp"] == {"error": "at the window's start: /proc/net/snmp: [Errno 2] No such file"}
    assert "error" not in w["cpu"] and "error" not in w["net"]
    w = hoststat.window(a, {**b, "cpu": {"error": "gone"}})
    assert w["cpu"] == {"error": "at the window's end: gone"}
    w = hoststat.window(a, {**b, "tcp": {**b["tcp"], "retrans_segs": a["tcp"]["retrans_segs"] - 1}})
    assert w["tcp"]["error"].startswith("RetransSegs went backwards"), w["tcp"]
    w = hoststat.window(a, {**b, "cpu_ids": [*a["cpu_ids"], 4096]})
    assert "the CPUs it may use changed" in w["cpu"]["error"]
    w = hoststat.window(a, {**b, "mono": a["mono"]})
    assert all("did not advance" in w[part]["error"] for part in hoststat.PARTS), w
