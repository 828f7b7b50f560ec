"""The figures the reports summarise across repeats, one row each: the only place a figure's title, unit,
better direction and role are spelled.

A new figure is one row here, the RunRow field of its name and the key of the same name and type in `Figures`
(xferbench/analysis/row.py), plus the code that measures it (xferbench/measure/figures.py, or whatever hands the
row that key): a row here that is no `Figures` key fails test_metrics.py, and a key the measuring code
misspells fails the type check. Everything else reads this table: the statistics per cell and against the
baseline (xferbench/analysis/summary.py), summary.csv, summary.md, report.html, the terminal's tables (progress.py) and
`xferbench compare`.

A figure's role decides what a difference from the baseline may be called:

- **ranked**: one Holm family per report (xferbench/analysis/stats.py): the verdict table, a p and a noise floor in
  summary.csv, `xferbench compare`'s default metrics;
- **compared**: a ratio and interval against the baseline with the interval's own verdict, unadjusted, in
  summary.csv only;
- **diagnostic**: a property of the instrument, not of the server (the generator's own CPU, the runner's):
  its values and ratios are reported, never a better or worse verdict. Two identical configurations can load
  Locust differently; that says nothing about either server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Better = Literal["lower", "higher", "none"]
Role = Literal["ranked", "compared", "diagnostic"]
# How the measured window becomes this one number (figures.py; the cgroup's for ctr_*), for the reader of a
# report: "rate" a counter's increase over the window's seconds; "quantile" from a histogram's increase;
# "count" a counter's increase; "per-unit" one counter's increase over another's; "mean" and "peak" of a
# gauge's samples; "life" a counter over the server's whole life (its container's cgroup); "search" the
# outcome of a capacity search, over many windows.
Window = Literal["rate", "quantile", "count", "per-unit", "mean", "peak", "life", "search"]

# The instrument's limits, read by the figures, the runner's warnings and the summary.
GEN_SATURATED_CORES = 0.9  # a Locust process above 0.9 cores is the bottleneck, not the server
# ... and so is one whose CPUs had less than this left idle, however little of them it got: on a virtual
# machine the hypervisor steals time, so a generator with no CPU left can show well under 0.9 cores of its own.
GEN_IDLE_MIN_CORES = 0.1
# A capacity search stops when its best passing and lowest failing rates are this close (relative): the
# resolution of the capacity figure.
CAPACITY_PRECISION = 0.10


@dataclass(frozen=True)
class Metric:
    name: str  # the RunRow field and Figures key (xferbench/analysis/row.py), and summary.csv's column prefix
    title: str
    unit: str  # as report/fmt.py's value() prints it: s, B, B/s, req/s, cores, /s, or "" (a count or share)
    better: Better
    role: Role
    window: Window
    short: str = ""  # the terminal table's column title, where the title is too wide for it
    column: bool = False  # a column of the ranking table (terminal, Markdown, HTML) when some cell measured it
    bar: bool = False  # a bar chart in report.html when some cell measured it
    resolution: float = 0.0  # the smallest change the figure can show: a noise floor of its own

    def __post_init__(self) -> None:
        if self.role != "diagnostic" and self.better == "none":
            raise ValueError(f"{self.name}: a figure that gets a verdict needs a better direction")

    @property
    def higher_is_better(self) -> bool | None:
        """For stats.compare: None for a figure that is never judged."""
        return None if self.role == "diagnostic" else self.better == "higher"

    @property
    def label(self) -> str:
        return self.short or self.title


# In the order of summary.csv's columns and of the verdict table's metrics.
METRICS: tuple[Metric, ...] = (
    # The server's whole process tree by its cgroup's clock (xferbench/measure/tree.py), over its own count of
    # requests where it keeps one, else the client's (the row's cpu_requests_from; the report says which).
    Metric("server_cpu_per_request_s", "server CPU per request", "s", "lower", "ranked", "per-unit",
           short="CPU/req", column=True, bar=True),
    Metric("server_cpu_per_op_s", "server CPU per client operation", "s", "lower", "compared", "per-unit"),
    Metric("server_cpu_per_gib_s", "server CPU per GiB", "s", "lower", "ranked", "per-unit", bar=True),
    Metric("capacity_rps", "capacity at SLO", "req/s", "higher", "ranked", "search", short="capacity", column=True,
           bar=True, resolution=CAPACITY_PRECISION),
    Metric("client_qps", "client QPS", "req/s", "higher", "ranked", "rate", short="QPS", column=True, bar=True),
    Metric("client_bytes_per_s", "client bytes/s", "B/s", "higher", "compared", "rate", short="bytes/s", column=True,
           bar=True),
    Metric("client_p50_s", "client P50", "s", "lower", "compared", "quantile"),
    Metric("client_p95_s", "client P95", "s", "lower", "compared", "quantile", short="P95", column=True, bar=True),
    Metric("client_p99_s", "client P99", "s", "lower", "ranked", "quantile", short="P99", column=True, bar=True),
    Metric("client_failures", "failures", "", "lower", "compared", "count"),
    Metric("server_qps", "server QPS", "req/s", "higher", "compared", "rate", bar=True),
    Metric("server_p95_s", "server P95", "s", "lower", "compared", "quantile", short="srv P95", column=True, bar=True),
    Metric("server_p99_s", "server P99", "s", "lower", "ranked", "quantile"),
    Metric("server_cpu_cores", "server CPU", "cores", "lower", "compared", "rate", short="srv CPU", column=True,
           bar=True),
    Metric("rss_peak_bytes", "peak RSS", "B", "lower", "ranked", "peak", short="RSS peak", column=True, bar=True),
    Metric("rss_mean_bytes", "mean RSS", "B", "lower", "compared", "mean"),
    Metric("gc_pauses", "GC pauses", "", "lower", "compared", "count"),
    Metric("gc_pause_total_s", "GC pause total", "s", "lower", "ranked", "count", short="GC pause", column=True,
           bar=True),
    Metric("gc_pause_per_request_s", "GC pause per request", "s", "lower", "compared", "per-unit", bar=True),
    Metric("gc_pause_p99_s", "GC pause P99", "s", "lower", "compared", "quantile", bar=True),
    # GC CPU over server CPU: what a GOGC setting trades against RSS (experiments/adaptive-gogc.toml)
    Metric("gc_cpu_share", "GC CPU share", "", "lower", "compared", "per-unit", column=True, bar=True),
    Metric("alloc_allocated_bytes", "allocator allocated", "B", "lower", "compared", "mean", bar=True),
    Metric("alloc_resident_bytes", "allocator resident", "B", "lower", "compared", "mean", short="alloc res.",
           column=True, bar=True),
    Metric("alloc_committed_bytes", "allocator committed (mimalloc)", "B", "lower", "compared", "mean", bar=True),
    Metric("gen_cpu_cores", "generator CPU", "cores", "none", "diagnostic", "rate", short="gen CPU", column=True,
           bar=True),
    Metric("runner_cpu_cores", "runner CPU", "cores", "none", "diagnostic", "rate"),
    # backend = "docker": the server container's cgroup (xferbench/measure/cgroup.py)
    Metric("ctr_mem_peak_bytes", "container memory peak", "B", "lower", "compared", "peak"),
    Metric("ctr_cpu_throttled_periods", "throttled periods", "", "lower", "compared", "life"),
    Metric("ctr_cpu_throttled_s", "throttled time", "s", "lower", "compared", "life"),
    Metric("conns_accepted_per_s", "connections accepted/s", "/s", "lower", "compared", "rate"),
    Metric("conns_opened_per_s", "client connections opened/s", "/s", "lower", "compared", "rate"),
    Metric("reconnects_per_s", "client reconnects/s", "/s", "lower", "compared", "rate"),
    Metric("time_wait_peak", "TIME_WAIT peak", "", "lower", "compared", "peak"),
    # A cell with load.tls (xferbench/config/tls.py): the server's handshakes, what they cost, what a TLS connection
    # holds; None in a plaintext cell. Columns, so that every TLS run's ranking shows them.
    Metric("tls_handshakes_per_s", "TLS handshakes/s", "/s", "lower", "compared", "rate", short="hs/s", column=True),
    Metric("tls_resumed_share", "TLS handshakes resumed", "", "higher", "compared", "per-unit", short="resumed",
           column=True),
    Metric("server_cpu_per_handshake_s", "server CPU per TLS handshake", "s", "lower", "compared", "per-unit",
           short="CPU/hs", column=True, bar=True),
    Metric("tls_bytes_per_conn", "TLS library bytes per open connection", "B", "lower", "compared", "mean",
           short="TLS B/conn", column=True),
    # The server's process tree in /proc (xferbench/measure/tree.py): what any server is measured by
    Metric("procs_peak", "processes peak", "", "lower", "compared", "peak"),
    Metric("proc_threads_peak", "threads peak", "", "lower", "compared", "peak"),
    Metric("proc_ctx_switches_per_s", "context switches/s", "/s", "lower", "compared", "rate"),
    Metric("proc_page_faults_per_s", "page faults/s", "/s", "lower", "compared", "rate"),
    Metric("proc_fds_peak", "open descriptors peak", "", "lower", "compared", "peak"),
)
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
# The metrics that get verdicts (one Holm family per report), in the order the verdict table lists them.
RANKED: tuple[str, ...] = tuple(m.name for m in METRICS if m.role == "ranked")
