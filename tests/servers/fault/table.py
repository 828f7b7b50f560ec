"""Turns the outcomes tests/servers/fault/test_toxics.py recorded (XFER_FAULT_TABLE=path.json) into BENCHMARKS.md's
table: one row per toxic and operation, one cell per (server, transport).

    XFER_FAULT_TABLE=/tmp/fault.json .venv/bin/python -m pytest -q tests/servers/fault/test_toxics.py
    .venv/bin/python -m tests.servers.fault.table /tmp/fault.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def markdown(results: list[dict[str, str]]) -> str:
    pairs = list(dict.fromkeys(f"{r['server']} {r['transport']}" for r in results))
    rows = list(dict.fromkeys((r["toxic"], r["what"], r["op"]) for r in results))
    by = {(r["toxic"], r["op"], f"{r['server']} {r['transport']}"): r for r in results}
    out = ["| toxic | during | " + " | ".join(pairs) + " |", "| --- | --- |" + " --- |" * len(pairs)]
    for toxic, what, op in rows:
        cells = []
        for p in pairs:
            r = by.get((toxic, op, p))
            if r is None:
                cells.append("-")
                continue
            # The client's outcome; the stored file during and after the fault; the retry without the toxic.
            state = r["during"] if r["during"] == r["after"] else f"{r['during']} → {r['after']}"
            cells.append(f"`{r['outcome']}`; {state}; retry {r['retry']}")
        out.append(f"| `{toxic}` ({what}) | {op} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown(json.loads(Path(sys.argv[1]).read_text())))
