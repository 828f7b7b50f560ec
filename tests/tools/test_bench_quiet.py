"""xferbench bench's judge of a quiet machine: CPU used by processes outside the bench's own tree."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import psutil

from xferbench.tools.bench.quiet import BUSY_CORES, Others

BURN_S = 1.5


def test_a_process_outside_the_tree_is_seen_as_others() -> None:
    """A CPU-bound loop that is not the bench's descendant (its shell parent exits, so it is re-parented)
    shows as others' CPU: at least half a core over its run, whatever else the machine does."""
    others = Others()
    token = f"xferbench-burner-{uuid.uuid4().hex}"  # the loop's $0, to find it by
    # `timeout` bounds the loop by itself, with SIGKILL: a shell started in the background may inherit SIGTERM
    # ignored, and then outlives its timeout (seen once under two pytest workers). `setsid ... &` leaves it to
    # init once the outer shell is gone.
    subprocess.run(
        ["sh", "-c", f"setsid timeout -s KILL {BURN_S} sh -c 'while :; do :; done' {token} >/dev/null 2>&1 &"],
        check=True,
        timeout=10,
    )
    deadline = time.monotonic() + BURN_S + 10
    while _running(token) and time.monotonic() < deadline:  # until the loop has ended
        time.sleep(0.05)
    assert not _running(token)
    assert others.cores() > max(0.5, BUSY_CORES)


def test_the_trees_own_cpu_is_not_others() -> None:
    """The same loop as this process's child is the bench's own. Others' CPU is then at most what the machine
    had left beside the child (every CPU but the child's share): counted as others too, the child's second would
    be counted twice, and a machine where no one else runs would show about a core of others."""
    others = Others()
    t0, c0 = time.monotonic(), os.times()
    subprocess.run(["timeout", str(BURN_S), "sh", "-c", "while :; do :; done"], check=False, timeout=10)
    seen, t1, c1 = others.cores(), time.monotonic(), os.times()
    dt = t1 - t0
    child = (c1.children_user + c1.children_system - c0.children_user - c0.children_system) / dt
    assert child > 0.3, child  # the loop did run
    assert seen <= (os.cpu_count() or 1) - child + 0.1, (seen, child)


def _running(token: str) -> bool:
    return any(token in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
