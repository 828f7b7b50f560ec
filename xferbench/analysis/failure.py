"""Why a run failed, in one line: its error, and the last meaningful line of the output that explains it (the
generator's or the server's, RunRow.stderr_tail), since an error such as "locust ... exited with status 2 before
it was ready" says what happened but not why. The terminal, summary.md and report.html all show this text."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xferbench.analysis.row import RunRow

MAX_CHARS = 300  # a reason is one line of a table or a list, not a log
# A line that says what went wrong, preferred over whatever the process printed after it (a Go panic's stack,
# Locust's statistics table, a traceback's frames).
_SAYS_WHY = re.compile(r"error|exception|panic|fatal|refused|denied|no such|not found|cannot|failed|invalid", re.I)


def reason(error: str, tail: Sequence[str]) -> str | None:
    """The tail's last line that says what went wrong (else its last non-blank line), unless the error says it
    already; None when there is nothing to add."""
    lines = [ln.strip() for ln in tail if ln.strip()]
    if not lines:
        return None
    line = next((ln for ln in reversed(lines) if _SAYS_WHY.search(ln)), lines[-1])
    if line in error:
        return None
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def text(row: RunRow) -> str:
    """A failed run's error with its reason: "locust ... before it was ready; it said: locust: error: ..."."""
    error = row.error or "failed"
    why = reason(error, row.stderr_tail or [])
    return f"{error}; it said: {why}" if why else error
