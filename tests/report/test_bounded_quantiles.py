"""A latency quantile its histogram cannot resolve is shown as its bound ("≤ 5.00 ms") and never judged
(RunRow.bounds, xferbench/analysis/summary.py, xferbench/report/fmt.py)."""

from __future__ import annotations

from xferbench.analysis import summary
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.report import fmt, tables

BOUND = {"server_p95_s": 0.005, "server_p99_s": 0.005}


def _rows() -> list[RunRow]:
    return [
        RunRow(cell, "command", "grpc", repeat=r + 1, pair=f"r{r + 1}", server_cpu_per_request_s=cpu * j,
               bounds=dict(BOUND))
        for cell, cpu in (("a", 4e-4), ("b", 4.2e-4))
        for r, j in enumerate((1.0, 1.02, 0.97))
    ]


def test_an_unresolved_quantile_shows_its_bound_and_gets_no_verdict() -> None:
    meta = RunMeta(experiment="etcd", baseline="a", cells=["a", "b"],
                   cell_configs={n: {"transport": "grpc", "load": {"mode": "open"}} for n in "ab"})
    s = summary.summarize(meta, _rows())
    b = next(c for c in s.cells if c.name == "b")
    assert b.est["server_p95_s"].center is None and b.est["server_p95_s"].bound == 0.005
    assert fmt.estimate(b.est["server_p95_s"], "s") == "≤ 5.00 ms"
    assert "server_p95_s" in tables.short_columns(s)  # shown in the ranking table ...
    assert not {"server_p95_s", "server_p99_s"} & {v.metric for v in s.verdicts}  # ... never judged
    assert "≤ 5.00 ms" in tables.markdown(s)
