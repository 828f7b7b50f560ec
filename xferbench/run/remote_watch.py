"""The watch of a load host's Locust workers (xferbench/run/generators.py), run there as
`PYTHON -X MARKER -c <this file's text> PYTHON -X MARKER -m locust ... --worker ...` from the checkout there. Sent
as text and standard library only, like the host check's probe.

It starts the worker in a process group of its own, the worker's output on stderr (the log here); answers each
"stat" line of stdin with the idle and wall seconds of the CPUs it may use (JSON, on stdout); and ends the worker's
group (SIGTERM, SIGKILL 5 s later) when stdin closes (the runner closed it, or the ssh session died) or on SIGTERM,
SIGHUP or SIGINT. MARKER (an -X option Python ignores) names the run's processes for the backstop.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

KILL_AFTER_S = 5.0


class Watch:
    """The worker's process group, and how it is ended."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=2, start_new_session=True)
        self.mine = os.sched_getaffinity(0)
        self.tick = os.sysconf("SC_CLK_TCK")

    def kill(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except OSError:
            pass

    def end(self, *_: Any) -> None:
        """SIGTERM to the group now, SIGKILL a little later."""
        self.kill(signal.SIGTERM)
        t = threading.Timer(KILL_AFTER_S, self.kill, (signal.SIGKILL,))
        t.daemon = True
        t.start()

    def idle(self) -> float:
        """The idle and iowait seconds of the CPUs it may use, from /proc/stat."""
        total = 0.0
        with open("/proc/stat") as f:
            for ln in f:
                w = ln.split()
                if w and w[0].startswith("cpu") and w[0][3:].isdigit() and int(w[0][3:]) in self.mine:
                    total += (float(w[4]) + float(w[5])) / self.tick
        return total

    def answer(self) -> None:
        """The "stat" lines of stdin; its end (EOF) ends the worker."""
        for line in sys.stdin:
            if line.strip() == "stat":
                sys.stdout.write(json.dumps({"idle_s": self.idle(), "t": time.monotonic(), "cpus": len(self.mine)})
                                 + "\n")
                sys.stdout.flush()
        self.end()


def main() -> None:
    watch = Watch(sys.argv[1:])
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, watch.end)
    threading.Thread(target=watch.answer, daemon=True).start()
    code = watch.proc.wait()
    watch.kill(signal.SIGKILL)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
