"""One line of runs.jsonl: what one run of one cell measured, as a typed record.

The runner fills a `RunRow` as the run goes (identity first, then the figures of its measured window, then
the soak's or the capacity search's own), writes `to_json()`, and the reports read it back with
`from_json()`. The JSON keys are the field names, exactly as before this type existed, so older run
directories still load; a key this version does not know is kept in `extra` and written back unchanged.

What the measuring code hands the row travels as `Figures`, a TypedDict whose keys are RunRow's figure fields:
a misspelt figure name is a type error (mypy --strict, `make lint`), never a key that lands in `extra`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypedDict

Status = Literal["ok", "failed", "interrupted"]
STATUSES: tuple[Status, ...] = ("ok", "failed", "interrupted")


@dataclass
class RunRow:
    # --- which run this is ----------------------------------------------------------------------------
    cell: str
    server: str
    transport: str
    experiment: str = ""
    repeat: int = 1
    order: int = 0
    pair: str = ""  # what pairs it with a baseline run: "r3", or "r3/<other cell>" in a duet
    axes: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    source: str = "scrape"  # where the server figures came from: scrape | promql
    started_at: str | None = None  # UTC, ISO 8601
    warmup_s: float | None = None

    # --- how it went ----------------------------------------------------------------------------------
    status: Status = "ok"
    error: str | None = None
    stderr_tail: list[str] | None = None
    warnings: list[str] = field(default_factory=list)

    # --- the processes --------------------------------------------------------------------------------
    ready: dict[str, str] | None = None  # the server's ready-line fields
    build_info: dict[str, str] | None = None  # the labels of its xfer_build_info
    pids: dict[str, int] | None = None  # server, locust, toxiproxy
    cpus: dict[str, list[int] | None] | None = None  # read back from the kernel: server, generator
    network: dict[str, Any] | None = None  # [network] settings and the proxy's address

    # --- the measured window: the load generator ------------------------------------------------------
    duration_s: float | None = None
    runner_cpu_cores: float | None = None
    gen_cpu_cores: float | None = None  # Locust's own process_cpu_seconds_total rate, else gen_cpu_cores_psutil
    gen_cpu_cores_psutil: float | None = None  # Locust's process tree, read by the runner
    gen_cpus_idle_cores: float | None = None  # the generator's pinned CPUs: idle (cores) over the window
    gen_cpus_steal_cores: float | None = None  # ... and stolen by the hypervisor
    client_qps: float | None = None
    client_bytes_per_s: float | None = None
    client_upload_bytes_per_s: float | None = None
    client_download_bytes_per_s: float | None = None
    client_p50_s: float | None = None
    client_p95_s: float | None = None
    client_p99_s: float | None = None
    client_requests: float | None = None
    client_failures: float | None = None
    client_failure_rate: float | None = None
    client_users: float | None = None
    client_methods: dict[str, dict[str, float | None]] | None = None  # method → qps, p50_s, p95_s, p99_s
    # A user locustfile's run ([load] locustfile): Locust's own statistics of its whole run, warm-up included
    # (requests, failures, p50_s, p95_s, p99_s, rps; xferbench/run/generators.py locust_stats)
    locust_stats: dict[str, float | None] | None = None
    # A load on other hosts ([load] hosts): per host, its Locust workers' share of the window (client_qps,
    # client_requests, gen_cpu_cores and per worker process), its CPUs' idle cores, and whether it saturated
    # (xferbench/run/generators.py LocustGenerator.host_figures)
    load_hosts: dict[str, dict[str, Any]] | None = None
    # An experiment with [hosts]: every host of the run ("this machine" too) by name, its own figures over the window
    # from its /proc: roles, address, start_at and end_at (this machine's clock), span_s (its own), and `cpu` (cores:
    # user, system, irq, softirq, steal, iowait, idle, busy; cpus), `net` (bytes and packets received and sent, and
    # per second; interfaces) and `tcp` (out_segs, retrans_segs, retrans_per_s, retrans_share), each {"error": why}
    # where it could not be read (xferbench/run/hostwindow.py, xferbench/measure/hoststat.py)
    hosts: dict[str, dict[str, Any]] | None = None

    # One dict per level of a stepped load (xferbench/measure/steps.py): users, its window's figures, gen_saturated.
    steps: list[dict[str, Any]] | None = None

    # --- the measured window: the server --------------------------------------------------------------
    server_qps: float | None = None
    server_p95_s: float | None = None
    server_p99_s: float | None = None
    # A figure the run could not resolve, only bound: its field is None and here is the most it can be, which the
    # reports show as "≤ bound" and never judge. A latency quantile in the server histogram's first bucket
    # (xferbench/measure/scrape.first_bucket_bound); the CPU figures when the window's CPU is under two steps of its
    # clock (/proc's 10 ms ticks; xferbench/measure/figures.py cost_figures).
    bounds: dict[str, float] | None = None
    server_errors: float | None = None
    server_cpu_cores: float | None = None
    server_bytes_per_s: float | None = None
    server_requests: float | None = None
    # What the server cost: its whole process tree by the clock of cpu_clock (its own cgroup, else /proc;
    # xferbench/measure/tree.py), over its own count of requests where it keeps one (cpu_requests_from: "server"),
    # else the client's; per client operation always over the client's.
    server_cpu_per_request_s: float | None = None
    cpu_requests_from: str | None = None
    server_cpu_per_op_s: float | None = None
    server_cpu_per_gib_s: float | None = None
    cpu_clock: str | None = None
    cpu_selfreport_ratio: float | None = None  # the server's own process_cpu_seconds_total over the tree's clock
    rss_peak_bytes: float | None = None  # the tree's, summed over its processes (else the server's own figure)
    rss_mean_bytes: float | None = None
    gc_pauses: float | None = None
    gc_pause_total_s: float | None = None
    gc_pause_p99_s: float | None = None
    gc_cpu_share: float | None = None
    gc_pause_per_request_s: float | None = None
    heap_inuse_mean_bytes: float | None = None
    alloc_allocated_bytes: float | None = None
    alloc_resident_bytes: float | None = None
    alloc_resident_peak_bytes: float | None = None
    alloc_committed_bytes: float | None = None  # mimalloc exports this one only
    scrape_check: Figures | None = None  # with PromQL: the same server figures from the built-in scraper
    cpu_profile: dict[str, Any] | None = None  # with profiling: {"samples": N, "shares": {bucket: share}}

    # --- the server's container (backend = "docker"; xferbench/run/containers/): its own cgroup's figures over
    # its life (one run), read just before it was stopped or at the last tick before it died ---------------
    container: dict[str, Any] | None = None  # image, id, name, cpus, memory_bytes
    ctr_mem_usage_bytes: float | None = None
    ctr_mem_peak_bytes: float | None = None  # the cgroup's high-water mark (page cache included)
    ctr_mem_failcnt: float | None = None  # times the memory limit was hit
    ctr_oom_kills: float | None = None  # the cgroup's OOM-kill count
    ctr_oom_killed: bool | None = None  # the engine says the server was OOM-killed
    ctr_cpu_periods: float | None = None  # CFS periods with the quota enforced
    ctr_cpu_throttled_periods: float | None = None
    ctr_cpu_throttled_s: float | None = None
    # --- the measured window: connections (xferbench/measure/figures.py connection_figures) ------------------------
    conns_accepted_per_s: float | None = None  # the server's xfer_connections_accepted_total rate
    conns_opened_per_s: float | None = None  # the client's xfer_client_connections_opened_total rate
    reconnects_per_s: float | None = None  # the client's xfer_client_reconnects_total rate
    time_wait_peak: int | None = None  # TIME_WAIT sockets on the server's port, peak of the per-second samples
    # --- the measured window: TLS, a cell with load.tls (xferbench/measure/figures.py tls_figures); None without
    tls_handshakes_per_s: float | None = None  # the server's xfer_tls_handshakes_total rate, else the client's count
    tls_resumed_share: float | None = None  # of those handshakes, the share that resumed a session
    tls_counted_by: str | None = None  # whose count those two are: "server" or "client"
    server_cpu_per_handshake_s: float | None = None  # server CPU cores over handshakes per second
    tls_bytes_per_conn: float | None = None  # xferd-c: xfer_tls_allocated_bytes over xfer_tls_connections (means)

    # --- the measured window: the server's process tree as /proc shows it (xferbench/measure/tree.py), whatever it
    # exports; summed over its processes
    procs_peak: float | None = None
    proc_threads_peak: float | None = None
    proc_ctx_switches_per_s: float | None = None
    proc_page_faults_per_s: float | None = None
    proc_fds_peak: float | None = None

    # --- files beside runs.jsonl ----------------------------------------------------------------------
    timeseries: str | None = None  # timeseries/<stem>.csv
    soak_series: str | None = None  # timeseries/<stem>.soak.csv
    flamegraph: str | None = None  # profiles/<stem>.svg (or .folded when no renderer is installed)

    # --- a soak (xferbench/measure/soak.py) -------------------------------------------------------------------
    soak_from_s: float | None = None
    soak_window_s: float | None = None
    soak_rss_growth: float | None = None
    soak_heap_metric: str | None = None
    soak_heap_growth: float | None = None
    soak_fds_start: int | None = None
    soak_fds_end: int | None = None
    soak_threads_start: int | None = None
    soak_threads_end: int | None = None
    soak_goroutines_start: int | None = None
    soak_goroutines_end: int | None = None
    soak_verdict: str | None = None
    soak_flags: list[str] | None = None

    # --- a capacity search (xferbench/measure/capacity.py) ----------------------------------------------------
    capacity_status: str | None = None
    capacity_rps: float | None = None
    capacity_steps: list[dict[str, Any]] | None = None

    # Keys of a runs.jsonl line that this version does not know, kept so that a rewrite loses nothing.
    extra: dict[str, Any] = field(default_factory=dict)

    def set_figures(self, figures: Figures) -> None:
        """Sets every figure `figures` names (one it leaves out keeps its value). The type checker refuses a
        name that is not a figure; one that gets past it (an untyped caller) is a programming error, not data
        to drop."""
        for name, value in figures.items():
            if name not in FIGURE_NAMES:
                raise KeyError(f"RunRow has no figure {name!r}")
            setattr(self, name, value)

    def figure(self, name: str) -> float | None:
        """A numeric figure by its metric name (xferbench/analysis/metrics.py), wherever it is kept."""
        value = getattr(self, name) if name in FIELD_NAMES else self.extra.get(name)
        return None if value is None else float(value)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def pair_key(self) -> str:
        """Which baseline run this row pairs with: its duet, or its round."""
        return self.pair or f"r{self.repeat}"

    def fail(self, error: str, tail: list[str]) -> None:
        self.status = "failed"
        self.error = error
        self.stderr_tail = tail[-20:]

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in FIELD_NAMES}
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRow:
        """A row from one runs.jsonl line; raises ValueError naming what is missing or wrong."""
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise ValueError(f"a runs.jsonl row needs {', '.join(missing)}; got keys {sorted(data)}")
        status = data.get("status", "ok")
        if status not in STATUSES:
            raise ValueError(f"row of cell {data['cell']!r}: status {status!r} is not one of {', '.join(STATUSES)}")
        data = {RENAMED.get(k, k): v for k, v in data.items()}
        known = {k: v for k, v in data.items() if k in FIELD_NAMES}
        for k in NOT_NULL:  # an older writer may have written null where this one keeps an empty value
            if known.get(k, 0) is None:
                known.pop(k)
        extra = {k: v for k, v in data.items() if k not in FIELD_NAMES and k != "extra"}
        return cls(**known, extra=extra)


class Figures(TypedDict, total=False):
    """A run's figures by RunRow field, as the measuring code hands them to the row (`RunRow.set_figures`): each
    key is a RunRow field of the same name and type (tests: test_run_row.py holds the two to it), and every
    figure of the metric table (xferbench/analysis/metrics.py) is one. Besides the measured numbers, what comes
    with them: the window's series file, the server's build labels, the built-in scraper's cross-check, a
    stepped load's levels, the CPU profile, the container's and the soak's own. What a row says about which run
    it is and how it went (cell, repeat, status, warnings, pids, ...) is not a figure. A key left out is a
    figure not measured here: the row keeps what it had."""

    # --- the processes
    build_info: dict[str, str] | None
    # --- the measured window: the load generator
    duration_s: float | None
    runner_cpu_cores: float | None
    gen_cpu_cores: float | None
    gen_cpu_cores_psutil: float | None
    gen_cpus_idle_cores: float | None
    gen_cpus_steal_cores: float | None
    client_qps: float | None
    client_bytes_per_s: float | None
    client_upload_bytes_per_s: float | None
    client_download_bytes_per_s: float | None
    client_p50_s: float | None
    client_p95_s: float | None
    client_p99_s: float | None
    client_requests: float | None
    client_failures: float | None
    client_failure_rate: float | None
    client_users: float | None
    client_methods: dict[str, dict[str, float | None]] | None
    locust_stats: dict[str, float | None] | None
    load_hosts: dict[str, dict[str, Any]] | None
    hosts: dict[str, dict[str, Any]] | None
    steps: list[dict[str, Any]] | None  # xferbench/measure/steps.py Level.to_json()
    # --- the measured window: the server
    server_qps: float | None
    server_p95_s: float | None
    server_p99_s: float | None
    bounds: dict[str, float] | None
    server_errors: float | None
    server_cpu_cores: float | None
    server_bytes_per_s: float | None
    server_requests: float | None
    server_cpu_per_request_s: float | None
    cpu_requests_from: str | None
    server_cpu_per_op_s: float | None
    server_cpu_per_gib_s: float | None
    cpu_clock: str | None
    cpu_selfreport_ratio: float | None
    rss_peak_bytes: float | None
    rss_mean_bytes: float | None
    gc_pauses: float | None
    gc_pause_total_s: float | None
    gc_pause_p99_s: float | None
    gc_cpu_share: float | None
    gc_pause_per_request_s: float | None
    heap_inuse_mean_bytes: float | None
    alloc_allocated_bytes: float | None
    alloc_resident_bytes: float | None
    alloc_resident_peak_bytes: float | None
    alloc_committed_bytes: float | None
    scrape_check: Figures | None
    cpu_profile: dict[str, Any] | None
    # --- the server's container
    ctr_mem_usage_bytes: float | None
    ctr_mem_peak_bytes: float | None
    ctr_mem_failcnt: float | None
    ctr_oom_kills: float | None
    ctr_oom_killed: bool | None
    ctr_cpu_periods: float | None
    ctr_cpu_throttled_periods: float | None
    ctr_cpu_throttled_s: float | None
    # --- the measured window: connections
    conns_accepted_per_s: float | None
    conns_opened_per_s: float | None
    reconnects_per_s: float | None
    time_wait_peak: int | None
    # --- the measured window: TLS
    tls_handshakes_per_s: float | None
    tls_resumed_share: float | None
    tls_counted_by: str | None
    server_cpu_per_handshake_s: float | None
    tls_bytes_per_conn: float | None
    # --- the measured window: the server's process tree
    procs_peak: float | None
    proc_threads_peak: float | None
    proc_ctx_switches_per_s: float | None
    proc_page_faults_per_s: float | None
    proc_fds_peak: float | None
    # --- files beside runs.jsonl
    timeseries: str | None
    soak_series: str | None
    flamegraph: str | None
    # --- a soak
    soak_from_s: float | None
    soak_window_s: float | None
    soak_rss_growth: float | None
    soak_heap_metric: str | None
    soak_heap_growth: float | None
    soak_fds_start: int | None
    soak_fds_end: int | None
    soak_threads_start: int | None
    soak_threads_end: int | None
    soak_goroutines_start: int | None
    soak_goroutines_end: int | None
    soak_verdict: str | None
    soak_flags: list[str] | None
    # --- a capacity search
    capacity_status: str | None
    capacity_rps: float | None
    capacity_steps: list[dict[str, Any]] | None


# Fields an older writer named otherwise: its name → today's.
RENAMED = {"quantile_bounds": "bounds"}
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunRow) if f.name != "extra")
FIGURE_NAMES: tuple[str, ...] = tuple(Figures.__annotations__)
REQUIRED = ("cell", "server", "transport")
NOT_NULL = ("axes", "config", "warnings", "repeat", "order", "pair", "source", "status")
