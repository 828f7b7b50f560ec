"""Ctrl-C stays an interruption when a cleanup step fails while it unwinds, and a stopped child is always
reaped: the two halves of "a second failure must not hide the first"."""

from __future__ import annotations

import signal
import subprocess
import sys

from xferbench.run import process
from xferbench.run.lifecycle import _interruption


def _raised_during_unwinding() -> Exception:
    try:
        try:
            raise KeyboardInterrupt
        finally:
            raise subprocess.TimeoutExpired(["locust"], 5.0)  # as a generator's stop could, in a `finally`
    except Exception as e:
        return e


def test_a_cleanup_error_during_ctrl_c_gives_back_the_ctrl_c() -> None:
    err = _raised_during_unwinding()
    assert isinstance(_interruption(err), KeyboardInterrupt)


def test_an_ordinary_error_is_not_an_interruption() -> None:
    try:
        try:
            raise ValueError("first")
        finally:
            raise RuntimeError("second")
    except RuntimeError as e:
        assert _interruption(e) is None


def test_stop_reaps_a_child_that_ignores_sigterm_and_says_it_was_killed() -> None:
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"  # its handler is in place
        assert process.stop(proc, grace_s=0.2) == -signal.SIGKILL
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
