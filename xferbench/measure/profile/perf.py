"""xferd-c's CPU samples, and a command server's unless it names a pprof address: `perf record -e cpu-clock
--call-graph dwarf,8192` on the server's PID for the measured window, then `perf script` read into folded
stacks, each frame "symbol (shared object)".

Software clock sampling works in containers where hardware counters do not (`perf stat -e instructions`
fails here). The stacks are unwound from each sample's copy of the user stack with the binaries' DWARF
unwind tables (CALL_GRAPH says why and what it costs), so they reach xferd-c's own functions through
glibc and libdeflate, which Debian builds without frame pointers. The classifier decides by the innermost
frame that matches, so a sample inside malloc or memcpy is attributed correctly whatever its callers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from xferbench.measure.profile.errors import ProfileError

FREQ_HZ = 999  # not 1000: off the timer tick, so sampling does not lock step with periodic work
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
SCRIPT_TIMEOUT_S = 120.0
# How perf unwinds a sample's user stack: DWARF, from an 8 KiB copy of the stack taken with each sample.
# Measured on one profiled round of xferd-c (8 users, 5 s, mix "upload:1,echo:1"; glibc / pool allocator),
# the share of samples whose stack has a frame of the xferd-c binary:
#   frame pointers (-g), release build without them:                7.6% / 8.6%
#   frame pointers (-g), build with -fno-omit-frame-pointer:         40-41% / 47% (a sample in a libc system
#     call wrapper, built without frame pointers, unwinds past its caller in xferd-c)
#   dwarf,4096:  100% / 100%, but a third of the stacks stop before the thread's root (clone3)
#   dwarf,8192:  100% / 99.95%, every stack reaches the root; the same with xferd-c built without frame pointers
#   dwarf,16384: 100% / 100%
# The cost, per 5 s window: perf.data 13 / 17 MB with dwarf,8192 (5 / 7 MB at 4 KiB, 23 / 39 MB at 16 KiB)
# against 0.25 / 0.4 MB with frame pointers, and `perf script` 1.0 s against 0.4 s. perf.data is deleted once
# folded. (lbr needs hardware branch records, which this machine's virtual CPUs do not have.)
CALL_GRAPH = "dwarf,8192"
# A Go program (a command server, xferbench/config/command.py) is unwound by its frame pointers instead: Go keeps
# them in every build, while perf's DWARF unwinding stops at the innermost frame of a Go program. Measured on
# xferd-go, 2 s of 4 KiB frame echo: with dwarf,8192, 1750 of 1776 stacks had one user frame (the rest two);
# with fp, 11 of 1772 had fewer than three, and perf.data was 0.35 MB against 14 MB.
CALL_GRAPHS = {"dwarf": CALL_GRAPH, "fp": "fp"}
_FRAME_RE = re.compile(r"^\s+[0-9a-f]+\s+(?P<sym>.*?)(?:\+0x[0-9a-f]+)?\s+\((?P<obj>.*)\)$")


def check() -> str:
    """The event to record, after checking perf is installed and allowed here; raises ProfileError saying
    what to do otherwise."""
    if shutil.which("perf") is None:
        raise ProfileError("profile: perf is not installed (Debian: apt-get install linux-perf; "
                           "scripts/bootstrap.sh installs it)")
    try:
        paranoid = int(PARANOID.read_text().strip())
    except (OSError, ValueError):
        paranoid = 2
    if os.geteuid() == 0:
        return "cpu-clock"
    if paranoid > 2:
        raise ProfileError(f"profile: {PARANOID} is {paranoid}: perf may not sample other processes as a "
                           "non-root user; run as root or `sysctl kernel.perf_event_paranoid=2`")
    return "cpu-clock" if paranoid < 2 else "cpu-clock:u"  # at 2, user space only


class PerfSampler:
    """`perf record` on one process for `seconds`, started at once; `finish()` returns its folded stacks."""

    def __init__(self, pid: int, seconds: float, data_path: Path, log_path: Path, unwind: str = "dwarf") -> None:
        event = check()
        self.data_path, self.log_path, self.seconds = data_path, log_path, seconds
        argv = ["perf", "record", "-e", event, "-F", str(FREQ_HZ), "--call-graph", CALL_GRAPHS[unwind], "-p", str(pid),
                "-o", str(data_path), "--", "sleep", f"{seconds:.3f}"]
        self._log = open(log_path, "wb")  # closed in finish() or stop()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

    def finish(self, timeout_s: float) -> dict[str, int]:
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise ProfileError(f"profile: perf record did not end within {timeout_s:.0f}s of its window") from None
        finally:
            self._log.close()
        if rc != 0 or not self.data_path.exists():
            raise ProfileError(f"profile: perf record exited with status {rc}: {self._tail()}")
        try:
            out = subprocess.run(["perf", "script", "-i", str(self.data_path), "-F", "ip,sym,dso"],
                                 capture_output=True, timeout=SCRIPT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ProfileError(f"profile: perf script took over {SCRIPT_TIMEOUT_S:.0f}s") from None
        if out.returncode != 0:
            raise ProfileError(f"profile: perf script exited with status {out.returncode}: "
                               f"{out.stderr.decode(errors='replace').strip()[-300:]}")
        return fold(out.stdout.decode(errors="replace").splitlines())

    def stop(self) -> None:
        """Ends a recording whose run failed (the window will not be read)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        self.data_path.unlink(missing_ok=True)

    def _tail(self) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-3:])
        except OSError:
            return "(no output)"


def fold(lines: Iterable[str]) -> dict[str, int]:
    """`perf script -F ip,sym,dso` output (per sample: its frames leaf first, one per line, then a blank
    line) → folded stacks, outermost frame first. A function inlined into another (perf lists it as
    "(inlined)", just before the frame it was inlined into) takes that frame's object: its code is there."""
    out: dict[str, int] = {}
    frames: list[list[str]] = []  # [symbol, object], leaf first
    inlined: list[list[str]] = []  # the frames still waiting for the object they were inlined into

    def flush() -> None:
        if frames:
            key = ";".join(f"{sym} ({obj})" for sym, obj in reversed(frames))
            out[key] = out.get(key, 0) + 1
            frames.clear()
            inlined.clear()

    for line in lines:
        m = _FRAME_RE.match(line)
        if m is None:
            flush()  # a blank line (or a sample header) ends a stack
            continue
        obj = os.path.basename(m.group("obj")) or "?"
        frame = [m.group("sym").replace(";", ":"), obj]
        frames.append(frame)
        if obj == "inlined":
            inlined.append(frame)
        else:
            for f in inlined:
                f[1] = obj
            inlined.clear()
    flush()
    return out
