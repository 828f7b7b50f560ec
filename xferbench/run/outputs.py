"""What a run writes beside its row: the per-second time series, and the CPU profile of the measured window
(started, finished, and merged per cell at the sweep's end)."""

from __future__ import annotations

import contextlib
import csv
import json
from collections.abc import Sequence
from pathlib import Path

from xferbench.analysis.row import Figures, RunRow
from xferbench.config import slug
from xferbench.config.series import Requests
from xferbench.measure import figures, profile
from xferbench.measure.scrape import Snapshot
from xferbench.measure.tree import Sample as TreeSample
from xferbench.run.live import CellFailed, Live


def write_series(run_dir: Path, stem: str, client: list[Snapshot], server: list[Snapshot], t0: float,
                 requests: Requests | None = None, tree: Sequence[TreeSample] = ()) -> None:
    rows = figures.series(client, server, t0, requests, tree)
    with open(run_dir / "timeseries" / f"{stem}.csv", "w", newline="", encoding="utf-8") as f:
        wr = csv.DictWriter(f, fieldnames=figures.SERIES_COLUMNS)
        wr.writeheader()
        for r in rows:
            wr.writerow({k: ("" if v is None else v) for k, v in r.items()})
    with open(run_dir / "timeseries" / f"{stem}.snapshots.jsonl", "w", encoding="utf-8") as f:
        for side, snaps in (("client", client), ("server", server)):
            for s in snaps:
                f.write(json.dumps({"side": side, **s.to_json()}) + "\n")


def start_profile(live: Live, stem: str, seconds: float) -> profile.Started:
    """The server's CPU sampling from now (the warm-up's end) for the rest of the measured window."""
    server = live.running_server
    try:
        return profile.start_server(live.run.cell.kind, server.pid, server.addr, seconds, live.run_dir, stem)
    except profile.ProfileError as e:
        raise CellFailed(str(e), []) from None


def profile_figures(live: Live, started: profile.Started) -> Figures:
    """The window's CPU attribution and flame graph. A profiled run without its profile fails: a
    comparison must never mix profiled windows with unprofiled ones."""
    try:
        shares, graph, notes = profile.finish(started, live.run_dir, f"{live.run.cell.name} r{live.run.repeat}")
    except profile.ProfileError as e:
        raise CellFailed(str(e), []) from None
    live.row.warnings += notes
    return {"cpu_profile": shares, "flamegraph": graph}


def merge_profiles(run_dir: Path, rows: list[RunRow]) -> None:
    """Per cell, one flame graph of all its profiled runs' samples (profile.cell_graph)."""
    runs: dict[str, list[str]] = {}
    for r in rows:
        if r.ok and r.flamegraph and (r.cpu_profile or {}).get("samples"):
            runs.setdefault(slug(r.cell), []).append(str(Path(r.flamegraph).with_suffix(".folded")))
    with contextlib.suppress(OSError, ValueError):  # the per-run graphs stand without it
        profile.merge_cells(run_dir, runs)
