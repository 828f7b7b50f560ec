"""Figures per request as the server counts them are judged only between cells whose servers count alike:
a gRPC call moves a whole file, a frame call one chunk (xferbench/analysis/summary.py, request_units)."""

from __future__ import annotations

from typing import Any

from xferbench.analysis import stats, summary
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.report import tables

# cell → (transport, chunk, CPU per server request, CPU per GiB): per request, frame's chunk calls are far cheaper
CELLS = {
    "grpc-64k": ("grpc", "64KiB", 15e-3, 0.95),
    "frame-64k": ("frame", "64KiB", 53e-6, 0.88),
    "frame-4m": ("frame", "4MiB", 1.8e-3, 0.57),
}
# Each cell's rounds scatter differently, so that every paired ratio has an interval.
JITTER = {"grpc-64k": (1.0, 1.03, 0.98, 1.01), "frame-64k": (0.99, 1.0, 1.04, 0.97), "frame-4m": (1.02, 0.97, 1.0, 1.01)}


def _rows(cells: dict[str, tuple[str, str, float, float]], requests_from: str = "server") -> list[RunRow]:
    return [
        RunRow(name, "xferd-go", transport, repeat=r + 1, pair=f"r{r + 1}", server_cpu_per_request_s=per_req * j,
               server_cpu_per_gib_s=per_gib * j, server_p99_s=per_req * 3 * j, cpu_requests_from=requests_from)
        for name, (transport, _, per_req, per_gib) in cells.items()
        for r, j in enumerate(JITTER[name])
    ]


def _meta(cells: dict[str, tuple[str, str, float, float]]) -> RunMeta:
    configs: dict[str, dict[str, Any]] = {
        name: {"transport": transport, "load": {"mode": "open", "transport": transport, "chunk": chunk}}
        for name, (transport, chunk, _, _) in cells.items()
    }
    return RunMeta(experiment="chunks", baseline="grpc-64k", cells=list(cells), cell_configs=configs)


def test_servers_counting_requests_differently_are_ranked_per_gib_and_never_judged_per_request() -> None:
    s = summary.summarize(_meta(CELLS), _rows(CELLS))
    assert s.rank_metric == "server_cpu_per_gib_s"
    judged = {v.metric for v in s.verdicts}
    assert "server_cpu_per_gib_s" in judged
    assert not judged & {"server_cpu_per_request_s", "server_p99_s"}, judged
    frame = next(c for c in s.cells if c.name == "frame-64k")
    assert frame.vs_base["server_cpu_per_request_s"].verdict == stats.UNLIKE
    assert frame.vs_base["server_cpu_per_request_s"].p is None
    # listed beside the family with its ratio, and the report says why
    assert any(v.metric == "server_cpu_per_request_s" and v.comparison.verdict == stats.UNLIKE for v in s.others)
    verdicts = dict(tables.header(s))["Verdicts"]
    assert "a frame call of a 4MiB chunk" in verdicts and "a grpc call" in verdicts, verdicts


def test_servers_counting_alike_are_judged_per_request() -> None:
    grpc = {name: ("grpc", chunk, per_req, per_gib) for name, (_, chunk, per_req, per_gib) in CELLS.items()}
    s = summary.summarize(_meta(grpc), _rows(grpc))
    assert s.rank_metric == "server_cpu_per_request_s"
    assert {"server_cpu_per_request_s", "server_p99_s"} <= {v.metric for v in s.verdicts}
    assert not any(v.comparison.verdict == stats.UNLIKE for v in s.others)


def test_cpu_per_request_divided_by_the_clients_count_stays_comparable() -> None:
    """A server without its own count: CPU per request divides by the client's operations, whatever the transport."""
    s = summary.summarize(_meta(CELLS), _rows(CELLS, requests_from="client"))
    assert "server_cpu_per_request_s" in {v.metric for v in s.verdicts}
    assert "server_p99_s" not in {v.metric for v in s.verdicts}
