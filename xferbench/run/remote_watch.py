"""The watch of a load host's Locust workers (xferbench/run/generators.py), run there as
`PYTHON -X MARKER -c <this file's text> PYTHON -X MARKER -m locust ... --worker ...` from the checkout there. Sent
as text and standard library only, like the host check's probe; the one module of xferbench it imports,
xferbench/measure/hoststat.py, is sent before it in the same text (xferbench/run/programs.py).

It starts the worker in a process group of its own, the worker's output on stderr (the log here); answers each
"stat" line of stdin (JSON, on stdout) with the host's own counters (`host`: hoststat.sample()) and what the runner
reads of them: the idle and iowait seconds of the CPUs it may use (`idle_s`), its monotonic clock (`t`) and how many
CPUs (`cpus`); and ends the worker's group (SIGTERM, SIGKILL 5 s later) when stdin closes (the runner closed it, or
the ssh session died) or on SIGTERM, SIGHUP or SIGINT. MARKER (an -X option Python ignores) names the run's
processes for the backstop.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from xferbench.measure.hoststat import sample

KILL_AFTER_S = 5.0


class Watch:
    """The worker's process group, and how it is ended."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=2, start_new_session=True)

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

    def answer(self) -> None:
        """The "stat" lines of stdin; its end (EOF) ends the worker."""
        for line in sys.stdin:
            if line.strip() == "stat":
                sys.stdout.write(json.dumps(stat()) + "\n")
                sys.stdout.flush()
        self.end()


def stat() -> dict[str, Any]:
    """The answer to "stat": the host's sample, with apart the fields of it that the saturation check reads."""
    host = sample()
    cpu = host["cpu"]
    idle = None if "error" in cpu else cpu["idle"] + cpu["iowait"]
    return {"idle_s": idle, "t": host["mono"], "cpus": len(host["cpu_ids"]), "host": host}


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
