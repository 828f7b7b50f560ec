"""A host's own figures from its /proc: what every host of a run (this machine, a load host, a server's host) spent
and moved over the measured window, whatever ran there.

- **CPU**: the `cpuN` lines of /proc/stat for the CPUs this process may use (os.sched_getaffinity): a lab host (a
  network namespace sharing this kernel, confined to a cpuset) counts its own CPUs, a real host all of them. Over a
  window, in cores: user (nice with it; guest time is in it already), system, irq, softirq, steal, iowait, idle.
- **Network**: /proc/net/dev, which is per network namespace (a lab host sees its own veth): every interface but `lo`
  and those enslaved to another (a bridge's or a bond's ports, /sys/class/net/IF/master), since what crosses a
  port to this host's own stack is counted again on its bridge, and what a bridge forwards between its ports is
  not this host's traffic. Bytes and packets received and sent.
- **TCP**: /proc/net/snmp's `Tcp:` OutSegs and RetransSegs (per network namespace too): segments retransmitted, per
  second, and as a share of the segments sent.

`sample()` reads the three files now; `window(a, b)` makes two samples of one host the figures of the time between
them, divided by that host's own monotonic clock. A part that could not be read, or whose counters went backwards,
is {"error": why}, never zeros.

Standard library only: the watches run on other hosts (xferbench/run/remote_watch.py, remote_server_watch.py) are
sent there as text with this module's text before them (xferbench/run/programs.py), so a host needs a Python, not
xferbench.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

HZ = os.sysconf("SC_CLK_TCK")  # /proc/stat counts in these ticks (USER_HZ)
# The first eight values of a cpuN line, in the kernel's order (guest and guest_nice follow; they are in user already).
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# A window's CPU figures, in cores: user holds nice too.
CPU_SHOWN = ("user", "system", "irq", "softirq", "steal", "iowait", "idle")
NET_FIELDS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets")
PARTS = ("cpu", "net", "tcp")


def cpu_seconds(text: str, cpus: Iterable[int], hz: float = HZ) -> dict[str, float]:
    """The seconds of each CPU_FIELDS summed over `cpus`, from /proc/stat's text; ValueError names what is missing."""
    want = set(cpus)
    total = dict.fromkeys(CPU_FIELDS, 0.0)
    seen: set[int] = set()
    for line in text.splitlines():
        w = line.split()
        if not w or not w[0].startswith("cpu") or not w[0][3:].isdigit() or int(w[0][3:]) not in want:
            continue
        if len(w) < 1 + len(CPU_FIELDS):
            raise ValueError(f"{w[0]}: {len(w) - 1} values, expected at least {len(CPU_FIELDS)} (user ... steal)")
        for name, v in zip(CPU_FIELDS, w[1:], strict=False):
            total[name] += int(v) / hz
        seen.add(int(w[0][3:]))
    if want - seen:
        raise ValueError(f"no line for CPU {', '.join(map(str, sorted(want - seen)))}")
    return total


def enslaved(name: str) -> bool:
    """An interface with a master (a bridge's or a bond's port): its traffic is counted on the master too."""
    return os.path.exists(f"/sys/class/net/{name}/master")


def net_counters(text: str, skip: Callable[[str], bool] = enslaved) -> dict[str, list[int]]:
    """Each interface's NET_FIELDS from /proc/net/dev's text, but `lo` and those `skip` names."""
    out: dict[str, list[int]] = {}
    for line in text.splitlines()[2:]:  # two lines of headers
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep or name == "lo" or skip(name):
            continue
        v = rest.split()
        if len(v) < 16:
            raise ValueError(f"{name}: {len(v)} values, expected 16 (8 received, 8 sent)")
        out[name] = [int(v[0]), int(v[1]), int(v[8]), int(v[9])]
    return out


def tcp_counters(text: str) -> dict[str, int]:
    """OutSegs and RetransSegs from /proc/net/snmp's text (a line of names, then one of values)."""
    lines = [ln.split()[1:] for ln in text.splitlines() if ln.startswith("Tcp:")]
    if len(lines) < 2:
        raise ValueError("no Tcp: lines")
    got = dict(zip(lines[0], lines[1], strict=False))
    try:
        return {"out_segs": int(got["OutSegs"]), "retrans_segs": int(got["RetransSegs"])}
    except KeyError as e:
        raise ValueError(f"no {e.args[0]} in its Tcp: lines") from None


def _read(path: str, parse: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    try:
        with open(path) as f:
            return parse(f.read())
    except (OSError, ValueError) as e:
        return {"error": f"{path}: {e}"}


def sample() -> dict[str, Any]:
    """This host's counters now, as JSON: the CPUs this process may use, its monotonic and wall clocks, and each part
    (or {"error"})."""
    cpus = sorted(os.sched_getaffinity(0))
    out: dict[str, Any] = {"mono": time.monotonic(), "wall": time.time(), "cpu_ids": cpus}
    out["cpu"] = _read("/proc/stat", lambda text: cpu_seconds(text, cpus))
    out["net"] = _read("/proc/net/dev", lambda text: {"interfaces": net_counters(text)})
    out["tcp"] = _read("/proc/net/snmp", tcp_counters)
    return out


def window(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The figures of one host between its samples `a` and `b`: the span of its own clock, and each part (or
    {"error"} naming the edge whose reading failed, or the counter that went backwards)."""
    span = float(b["mono"]) - float(a["mono"])
    out: dict[str, Any] = {"span_s": round(span, 3)}
    for part, figures in (("cpu", _cpu), ("net", _net), ("tcp", _tcp)):
        pa, pb = a.get(part) or {"error": "not read"}, b.get(part) or {"error": "not read"}
        if "error" in pa:
            out[part] = {"error": f"at the window's start: {pa['error']}"}
        elif "error" in pb:
            out[part] = {"error": f"at the window's end: {pb['error']}"}
        elif span <= 0:
            out[part] = {"error": f"its clock did not advance between the window's samples ({span:.3f} s)"}
        else:
            try:
                out[part] = figures(pa, pb, span, a, b)
            except ValueError as e:
                out[part] = {"error": str(e)}
    return out


def _delta(name: str, then: float, now: float) -> float:
    if now < then:
        raise ValueError(f"{name} went backwards ({then:g} → {now:g}): a counter reset, or a device replaced")
    return now - then


def _cpu(pa: dict[str, Any], pb: dict[str, Any], span: float, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    if a.get("cpu_ids") != b.get("cpu_ids"):
        raise ValueError(f"the CPUs it may use changed during the window ({a.get('cpu_ids')} → {b.get('cpu_ids')})")
    d = {k: _delta(f"CPU {k} time", pa[k], pb[k]) / span for k in CPU_FIELDS}
    d["user"] += d.pop("nice")
    out: dict[str, Any] = {"cpus": len(b.get("cpu_ids") or ())}
    out.update({k: round(d[k], 4) for k in CPU_SHOWN})
    out["busy"] = round(sum(d.values()) - d["idle"] - d["iowait"], 4)
    return out


def _net(pa: dict[str, Any], pb: dict[str, Any], span: float, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    before, after = pa["interfaces"], pb["interfaces"]
    names = sorted(set(before) & set(after))
    if not names:
        raise ValueError("no interface but lo at both ends of the window")
    total = dict.fromkeys(NET_FIELDS, 0.0)
    for name in names:
        for i, k in enumerate(NET_FIELDS):
            total[k] += _delta(f"{name} {k}", before[name][i], after[name][i])
    out: dict[str, Any] = {"interfaces": names}
    for k in NET_FIELDS:
        out[k] = int(total[k])
        out[f"{k}_per_s"] = round(total[k] / span, 1)
    gone = sorted(set(before) ^ set(after))
    if gone:
        out["left_out"] = gone  # came or went during the window
    return out


def _tcp(pa: dict[str, Any], pb: dict[str, Any], span: float, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    sent = _delta("OutSegs", pa["out_segs"], pb["out_segs"])
    again = _delta("RetransSegs", pa["retrans_segs"], pb["retrans_segs"])
    return {
        "out_segs": int(sent),
        "retrans_segs": int(again),
        "retrans_per_s": round(again / span, 3),
        "retrans_share": round(again / sent, 6) if sent else None,  # None: no segment sent, so no share
    }


if __name__ == "__main__":  # sent alone to a host that has no watch of ours (xferbench/run/hostwindow.py): one sample
    import json

    print(json.dumps(sample()))
