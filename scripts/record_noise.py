"""Writes tests/data/recorded_noise.json from a real run: the per-run values of the verdict metrics of every
cell, aligned by pair (round or duet), which tests/analysis/test_stats.py resamples to simulate A/A experiments.

    .venv/bin/xferbench run RUN.toml --out DIR && .venv/bin/python scripts/record_noise.py DIR "how DIR was made"

Only pairs in which every cell has a row are kept; in a duet run every cell pairs with the baseline run of its
own duet, so a run of the baseline and its A/A copy (aa = true, no other cell) records exactly the noise a
duet's ratio sees.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from xferbench.analysis.metrics import RANKED
from xferbench.analysis.summary import load

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "recorded_noise.json"


def main(run_dir: str, source: str) -> None:
    s = load(Path(run_dir))
    cells = {c.name: c for c in s.cells}
    metrics = [m for m in RANKED if all(c.by_pair.get(m) for c in cells.values())]
    keys = sorted(set.intersection(*(set(c.by_pair[m]) for c in cells.values() for m in metrics)))
    if len(keys) < 3:
        sys.exit(f"{run_dir}: {len(keys)} pairs in which every cell ran; want a run of the baseline and its A/A copy")
    doc = {
        "source": source,
        "run": s.meta.get("experiment"),
        "started_at": s.meta.get("started_at"),
        "pinning": (s.meta.get("pinning") or {}).get("text"),
        "duet": s.meta.get("duet"),
        "repeats": len(keys),
        "pairs": keys,
        "cells": {name: {m: [c.by_pair[m][k] for k in keys] for m in metrics} for name, c in cells.items()},
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{OUT}: {len(cells)} cells x {len(keys)} pairs, metrics {', '.join(metrics)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
