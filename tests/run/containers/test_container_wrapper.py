"""The container wrapper's exit status is the server's, also when the server ends between the wrapper's
interrupted `wait` and its next check (a race seen as status 143 from a server that exited 0 on SIGTERM). A stop
that comes before the wrapper has started the server ends the wrapper as the signal would, not the wrapper
killed outright (seen as status -15 when a server printed its ready line before the wrapper set its traps).
Each race is forced by a pause; the wrapper runs under the system's /bin/sh, as in an image."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from xferbench.run.containers.backend import WRAPPER

RACE = WRAPPER.replace("wait $pid; code=$?\n", "wait $pid; code=$?\nsleep 0.5\n", 1)
# Says "armed" once its traps are set, then pauses before it looks for a stop: a stop sent on "armed" comes first.
EARLY = WRAPPER.replace('[ -z "$sig" ] || exit', 'echo armed; sleep 0.5; [ -z "$sig" ] || exit', 1)
GRACEFUL = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); "
    "print('up', flush=True); time.sleep(30)"
)


def _stopped(wrapper: str, *server: str, stop_on: bytes = b"up\n") -> tuple[int, bytes]:
    """Starts the wrapper on `server`, sends it SIGTERM once it prints `stop_on` (by default, once the server's
    handler is in place), returns the wrapper's status and what it printed after that line."""
    p = subprocess.Popen(["/bin/sh", "-c", wrapper, *server], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert p.stdout is not None and p.stdout.readline() == stop_on
        p.send_signal(signal.SIGTERM)
        return p.wait(timeout=20), p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if p.stdout is not None:
            p.stdout.close()


@pytest.mark.parametrize("wrapper", [WRAPPER, RACE], ids=["as-is", "race-forced"])
def test_a_server_that_exits_0_on_sigterm_gives_0(wrapper: str) -> None:
    assert WRAPPER != RACE  # the pause went in
    assert _stopped(wrapper, sys.executable, "-c", GRACEFUL)[0] == 0


def test_a_server_killed_by_sigterm_gives_143() -> None:
    assert _stopped(RACE, "sh", "-c", "echo up; exec sleep 30")[0] == 128 + signal.SIGTERM


def test_a_server_killed_outright_gives_137_and_one_exiting_gives_its_code() -> None:
    killed = subprocess.run(["/bin/sh", "-c", WRAPPER, "sh", "-c", "kill -KILL $$"], stderr=subprocess.DEVNULL)
    assert killed.returncode == 128 + signal.SIGKILL
    assert subprocess.run(["/bin/sh", "-c", WRAPPER, "sh", "-c", "exit 3"], stderr=subprocess.DEVNULL).returncode == 3


def test_a_stop_before_the_server_starts_ends_the_wrapper_as_the_signal_would() -> None:
    assert WRAPPER != EARLY  # the pause went in
    status, printed = _stopped(EARLY, "sh", "-c", "echo up; exec sleep 30", stop_on=b"armed\n")
    # The wrapper lives on past the signal, then ends as the signal would have, and the server never starts.
    assert status == 128 + signal.SIGTERM
    assert printed == b""
