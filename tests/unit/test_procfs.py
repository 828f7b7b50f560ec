"""xferbench.procfs against this very process and a process that has exited."""

from __future__ import annotations

import os
import subprocess
import sys

from xferbench import procfs


def test_this_process() -> None:
    st = procfs.status(os.getpid())
    rss, threads, fds = procfs.rss_bytes(st), procfs.threads(st), procfs.open_fds(os.getpid())
    assert rss is not None and rss > 1 << 20  # a Python interpreter with pytest loaded
    assert threads is not None and threads >= 1
    assert fds is not None and fds >= 3  # stdin, stdout, stderr at least
    r, w = os.pipe()
    try:
        assert procfs.open_fds(os.getpid()) == fds + 2  # counts every descriptor, exactly
    finally:
        os.close(r)
        os.close(w)


def test_a_process_that_has_exited_gives_none() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # reaped: the pid names no process any more
    assert procfs.status(p.pid) == {}
    assert procfs.rss_bytes({}) is None and procfs.threads({}) is None
    assert procfs.open_fds(p.pid) is None
