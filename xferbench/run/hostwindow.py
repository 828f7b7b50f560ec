"""Every host's own figures over a run's measured window (RunRow.hosts), in a run of an experiment with [hosts]:

- this machine (THIS_MACHINE), with the roles it has in the run: the server (unless `[[servers]] host`), the load
  (Locust, unless `[load] hosts`, where it runs Locust's master), and the runner, always;
- each load host, from its Locust workers' watch, asked "stat" at the window's edges (generators.py);
- the server's host, from the server's watch, whose "stat" each tick carries it (remoteserver.py); a container
  server's host, whose engine runs no watch of ours, by one ssh command running hoststat.py at each edge (`asked`).

Each is xferbench/measure/hoststat.py's sample at the window's start and at its end, read on that host and stamped
"at" this machine's time (the midpoint of the ask and the answer, so that no series is stamped by another host's
clock); its rates divide by that host's own monotonic clock between the two. A host without both samples gets each
part as {"error": why}.
"""

from __future__ import annotations

import json
import time
from typing import Any

from xferbench.config import Host
from xferbench.measure import hoststat
from xferbench.run import programs, remote
from xferbench.run.generators import Generator
from xferbench.run.live import Live
from xferbench.run.remoteserver import RemoteServer

ASK_TIMEOUT_S = 10.0
THIS_MACHINE = "this machine"  # a [hosts] name has no space (config/hosts.py), so this names no other host
Sample = dict[str, Any]


def edge(live: Live) -> dict[str, Sample | None]:
    """The samples of this machine and of the server's host (its watch's at the last tick) now."""
    t0 = time.time()
    here = hoststat.sample()
    out: dict[str, Sample | None] = {THIS_MACHINE: {**here, "at": (t0 + time.time()) / 2}}
    server, name = live.running_server, live.run.cell.host
    if name is not None:
        out[name] = server.host_sample if isinstance(server, RemoteServer) else asked(live.exp.hosts[name])
    return out


# hoststat's own text, run as a program: for a server host with no watch of ours (a container on its engine).
ONE_SAMPLE = programs.program(hoststat)


def asked(host: Host) -> Sample | None:
    """The host's counters now, read by one ssh command; None when it did not answer (the figures then say so)."""
    t0 = time.time()
    try:
        r = remote.run(host, [host.python, "-c", ONE_SAMPLE], timeout_s=ASK_TIMEOUT_S, what="reading its /proc counters")
        got = json.loads(r.stdout)
    except (remote.RemoteError, ValueError):
        return None
    return {**got, "at": (t0 + time.time()) / 2} if isinstance(got, dict) else None


def figures(
    live: Live, start: dict[str, Sample | None], end: dict[str, Sample | None], gen: Generator
) -> dict[str, dict[str, Any]]:
    """The row's `hosts`: by host, its roles, address, the window's edges on this machine's clock, and its figures."""
    cell, placement = live.run.cell, live.placement
    facts = {f.name: f for f in placement.hosts} if placement is not None else {}
    here = "master" if cell.load.hosts else "load"
    roles: dict[str, list[str]] = {THIS_MACHINE: ([] if cell.host else ["server"]) + [here, "runner"]}
    samples = {name: (start.get(name), end.get(name)) for name in start}
    if cell.host is not None:
        roles[cell.host] = ["server"]
    for name, pair in gen.host_samples().items():
        roles.setdefault(name, []).append("load")
        samples.setdefault(name, pair)  # a host that is both: the server's watch reads it
    out = {}
    for name, rs in roles.items():
        if name == THIS_MACHINE:
            address = placement.server_address if placement is not None else None
            address = address or next((f.here for f in facts.values() if f.here), None)
        else:
            address = facts[name].address if name in facts else None
        out[name] = {"roles": rs, "address": address, **_window(*samples.get(name, (None, None)))}
    return out


def _window(a: Sample | None, b: Sample | None) -> dict[str, Any]:
    if a is None or b is None:
        why = f"no sample of its /proc counters at the window's {'start' if a is None else 'end'}"
        return {part: {"error": why} for part in hoststat.PARTS}
    return {"start_at": round(float(a["at"]), 3), "end_at": round(float(b["at"]), 3), **hoststat.window(a, b)}
