"""Per-cell summaries across repeats and the run's verdicts: every cell against the baseline, paired by
round, one Holm family per report, each verdict beside its metric's noise floor (xferbench/analysis/stats.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from xferbench.analysis import runmeta, stats
from xferbench.analysis.metrics import BY_NAME, GEN_SATURATED_CORES, METRICS, RANKED, Metric
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta, RunMetaError


@dataclass
class CellSummary:
    name: str
    server: str
    transport: str
    axes: dict[str, str]
    n_ok: int = 0
    n_failed: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    est: dict[str, stats.Estimate] = field(default_factory=dict)
    vs_base: dict[str, stats.Comparison] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)
    by_pair: dict[str, dict[str, float]] = field(default_factory=dict)  # metric → pair key → value


@dataclass(frozen=True)
class Verdict:
    cell: str
    metric: str
    comparison: stats.Comparison
    holm: bool = True  # in the report's Holm family; else a compared figure's own interval, or a held figure


@dataclass
class Summary:
    meta: RunMeta
    rows: list[RunRow]
    cells: list[CellSummary]
    baseline: str  # the baseline, or with one per [[servers]] table the first table's (what an A/A check copies)
    rank_metric: str = "client_qps"
    rank_reason: str = ""
    verdicts: list[Verdict] = field(default_factory=list)  # the Holm family, in table order
    # Beyond the family, so that every table shows what summary.csv says: each compared figure whose own interval
    # called it better or worse (unadjusted), and each figure the load held fixed.
    others: list[Verdict] = field(default_factory=list)
    floors: dict[str, float | None] = field(default_factory=dict)  # metric → noise floor (0.05 = ±5%)
    alpha: float = stats.ALPHA
    base_of: dict[str, str] = field(default_factory=dict)  # every cell → the baseline it is judged against

    def baseline_of(self, name: str) -> str:
        return self.base_of.get(name, self.baseline)

    @property
    def baselines(self) -> list[str]:
        """Every baseline, in the cells' order: one, or one per [[servers]] table."""
        return list(dict.fromkeys(self.baseline_of(c.name) for c in self.cells)) or [self.baseline]

    def is_baseline(self, name: str) -> bool:
        return name in self.baselines

    @property
    def table(self) -> list[Verdict]:
        """The verdict table's rows, in every report: the Holm family, then the others."""
        return self.verdicts + self.others

    def ranked(self, metric: str | None = None) -> list[CellSummary]:
        if self.meta.soak:
            return list(self.cells)  # a soak ranks nothing: the experiment's order
        metric = metric or self.rank_metric
        higher = BY_NAME[metric].better == "higher"
        table = {b: i for i, b in enumerate(self.baselines)}

        def key(c: CellSummary) -> tuple[int, float]:
            # With a baseline per table, each table is ranked on its own, in the experiment's order.
            m = c.est.get(metric)
            if m is None or m.center is None:
                return table.get(self.baseline_of(c.name), 0), float("inf")
            return table.get(self.baseline_of(c.name), 0), -m.center if higher else m.center

        return sorted(self.cells, key=key)

    def present_metrics(self) -> list[str]:
        """Metrics with at least one value in some cell (a Go-only sweep has no allocator columns...); a byte rate
        that is zero everywhere does not apply (a load that counts no bytes: a user's locustfile, Echo)."""
        def present(m: Metric) -> bool:
            centers = [c.est[m.name].center for c in self.cells if c.est.get(m.name) is not None]
            seen = [x for x in centers if x is not None]
            return bool(seen) and (m.unit != "B/s" or any(seen))

        return [m.name for m in METRICS if present(m)]

    def shown_metrics(self) -> list[str]:
        """present_metrics, and the quantiles no cell could resolve but some bounded ("≤ 5 ms"): shown, not judged."""
        present = set(self.present_metrics())
        return [m.name for m in METRICS
                if m.name in present or any(c.est.get(m.name) is not None and c.est[m.name].bound for c in self.cells)]

    @property
    def aa_cell(self) -> str | None:
        name = self.meta.aa_cell
        return name if any(c.name == name for c in self.cells) else None

    def floor_text(self) -> str:
        """One line for the top of every report: what this run can tell apart."""
        parts = [
            f"±{f * 100:.1f}% in {BY_NAME[m].title}" for m, f in self.floors.items() if f is not None
        ]
        if not parts:
            return (
                f"no noise floor: every compared cell needs at least {stats.MIN_REPEATS} repeats "
                "(xferbench run --repeat N)"
            )
        return "on this machine, this run can tell apart differences of " + ", ".join(parts)


class RunDirError(ValueError):
    """A run directory whose runs.jsonl cannot be read; the message names the file and line."""


def read_run(run_dir: Path) -> tuple[RunMeta, list[RunRow]]:
    meta_path = run_dir / runmeta.FILE
    try:
        # A run directory without one still reports its rows, under no name.
        meta = runmeta.load(meta_path) if meta_path.exists() else RunMeta(experiment="", cells=[])
    except RunMetaError as e:
        raise RunDirError(str(e)) from None
    path = run_dir / "runs.jsonl"
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(RunRow.from_json(json.loads(line)))
            except ValueError as e:  # json.JSONDecodeError is a ValueError too
                raise RunDirError(f"{path}:{n}: {e}") from None
    return meta, rows


def _cells(meta: RunMeta, rows: list[RunRow]) -> dict[str, CellSummary]:
    order: list[str] = list(meta.cells)
    for r in rows:
        if r.cell not in order:
            order.append(r.cell)
    cells: dict[str, CellSummary] = {}
    for name in order:
        first = next((r for r in rows if r.cell == name), None)
        if first is None:
            cfg = meta.cell_config(name)
            cells[name] = CellSummary(name, cfg.get("server", "?"), cfg.get("transport", "?"), {})
        else:
            cells[name] = CellSummary(name, first.server, first.transport, first.axes)
    for r in rows:
        c = cells[r.cell]
        if r.ok:
            c.n_ok += 1
            for m in METRICS:
                v = r.figure(m.name)
                if v is not None:
                    c.values.setdefault(m.name, []).append(v)
                    c.by_pair.setdefault(m.name, {})[r.pair_key] = v
        elif r.status == "failed":
            c.n_failed += 1
            c.errors.append(f"r{r.repeat}: {r.error}")
        for w in r.warnings:
            if w not in c.warnings:
                c.warnings.append(w)
    for c in cells.values():
        for m in METRICS:
            bound = _bound(rows, c, m.name)
            if bound is not None:
                # Some runs could only bound it: the others' values are the slower runs, so their mean would be
                # biased up. The cell's figure is the bound alone, shown ("≤ 5.00 ms") and never compared.
                c.values.pop(m.name, None)
                c.by_pair.pop(m.name, None)
                c.est[m.name] = replace(stats.estimate([]), bound=bound)
            else:
                c.est[m.name] = stats.estimate(c.values.get(m.name, []))
    return cells


def _bound(rows: list[RunRow], c: CellSummary, metric: str) -> float | None:
    """When some completed run of the cell could not resolve the figure (RunRow.bounds), the most any
    run's could be: the largest of its bounds and of the other runs' values. Otherwise None."""
    ok = [r for r in rows if r.ok and r.cell == c.name]
    bounds = [r.bounds[metric] for r in ok if r.bounds and metric in r.bounds]
    return max([*bounds, *c.values.get(metric, [])]) if bounds else None


# What a fixed offered load holds fixed: every cell serves the rate it is offered, so these say nothing of it.
HELD_BY_LOAD = ("client_qps", "server_qps", "client_bytes_per_s")


# Figures per request as the server counts them (server_cpu_per_request_s only where the server's count divided).
PER_SERVER_REQUEST = ("server_cpu_per_request_s", "server_qps", "server_p95_s", "server_p99_s", "gc_pause_per_request_s")


def request_units(meta: RunMeta, names: set[str] | None = None) -> set[str]:
    """What one request is, as each cell's server counts it (of the cells `names`, default all): a gRPC call moves
    a whole file however it is chunked, while the frame protocol makes every chunk a call of its own, so its chunk
    size sets the count."""
    units = set()
    for name, cfg in meta.cell_configs.items():
        if names is not None and name not in names:
            continue
        load = cfg.get("load") or {}
        transport = cfg.get("transport") or load.get("transport") or "grpc"
        units.add(f"a frame call of a {load.get('chunk')} chunk" if transport == "frame" else f"a {transport} call")
    return units


def unlike_requests(meta: RunMeta, rows: list[RunRow], names: set[str] | None = None) -> set[str]:
    """The figures per server request the cells `names` (default all) cannot compare: all of them when their
    servers count requests differently (request_units), except CPU per request where every run divided by the
    client's count."""
    if len(request_units(meta, names)) < 2:
        return set()
    by_client = all(r.cpu_requests_from == "client" for r in rows if r.ok and (names is None or r.cell in names))
    return {m for m in PER_SERVER_REQUEST if not (m == "server_cpu_per_request_s" and by_client)}


def judged_together(meta: RunMeta) -> list[set[str]]:
    """The sets of cells compared with each other: all of them, or each [[servers]] table with its own baseline."""
    if not meta.baselines:
        return [set(meta.cells)]
    tables: dict[str, set[str]] = {}
    for cell, base in meta.baselines.items():
        tables.setdefault(base, {base}).add(cell)
    return list(tables.values())


def offered(meta: RunMeta) -> bool:
    """Whether every cell was offered a fixed rate: loadgen's open loop, or a paced user locustfile."""
    loads = [cfg.get("load") or {} for cfg in meta.cell_configs.values()]
    return bool(loads) and all(ld.get("mode") == "open" or ld.get("paced") for ld in loads)


def rank_metric(meta: RunMeta, rows: list[RunRow]) -> tuple[str, str]:
    """The metric that ranks the cells, and why: client QPS only measures the server in a closed loop whose
    generator kept up; under a fixed offered load every cell serves the same rate, so the server's cost
    per request is what differs."""
    loads = [cfg.get("load") or {} for cfg in meta.cell_configs.values()]
    modes = {ld.get("mode") for ld in loads}
    if "capacity" in modes:
        return "capacity_rps", "capacity mode: the highest offered rate each cell served within the SLO"
    if any(ld.get("paced") for ld in loads) and offered(meta):
        return "server_cpu_per_request_s", (
            "fixed offered load (a paced locustfile): every cell served the same rate, so its cost differs"
        )
    if "open" in modes:
        if any("server_cpu_per_request_s" in unlike_requests(meta, rows, t) for t in judged_together(meta)):
            return "server_cpu_per_gib_s", (
                "fixed offered load over servers that count requests differently (a gRPC call moves a whole file, a "
                "frame call one chunk), so the cost per GiB moved ranks"
            )
        return "server_cpu_per_request_s", "fixed offered load: every cell served the same rate, so its cost differs"
    saturated = [r for r in rows if _generator_saturated(r)]
    if saturated:
        return "server_cpu_per_request_s", (
            f"closed loop with the load generator saturated in {len(saturated)} run{'s' * (len(saturated) != 1)}: "
            "client QPS would measure Locust, so the server's cost per request ranks"
        )
    return "client_qps", "closed loop, load generator below saturation"


def _generator_saturated(row: RunRow) -> bool:
    """Whether the run's load generator saturated: with its workers on other hosts ([load] hosts), some host's own
    check said so (RunRow.load_hosts); else its CPU."""
    if row.load_hosts:
        return any(bool(h.get("saturated")) for h in row.load_hosts.values())
    return (row.gen_cpu_cores or 0) > GEN_SATURATED_CORES


def profiled(rows: list[RunRow], where: str = "") -> bool:
    """Whether the completed runs were profiled; raises RunDirError when some were and some were not:
    sampling costs the server CPU (BENCHMARKS.md), so their figures must never be compared."""
    ok = [r for r in rows if r.ok]
    with_p = [r for r in ok if r.cpu_profile is not None]
    if with_p and len(with_p) < len(ok):
        without = sorted({r.cell for r in ok if r.cpu_profile is None})
        raise RunDirError(f"{where or 'these runs'}: {len(with_p)} of {len(ok)} completed runs were profiled and "
                          f"the others not (e.g. {', '.join(without[:3])}); profiling costs the server CPU, so "
                          "profiled and unprofiled windows are not compared — rerun them alike")
    return bool(with_p)


def summarize(meta: RunMeta, rows: list[RunRow]) -> Summary:
    profiled(rows, meta.experiment)
    cells = _cells(meta, rows)
    order = list(cells)
    baseline = meta.baseline or (order[0] if order else "")
    if baseline not in cells and order:
        baseline = order[0]
    metric, reason = rank_metric(meta, rows)
    alpha = float(stats.ALPHA if meta.alpha is None else meta.alpha)
    # A cell whose own baseline has no rows (an older run's file, a cell renamed) is judged against the first.
    base_of = {n: b if (b := meta.baseline_of(n)) in cells else baseline for n in cells}
    s = Summary(meta, rows, list(cells.values()), baseline, metric, reason, alpha=alpha, base_of=base_of)
    if baseline not in cells or meta.soak:  # a soak compares nothing: one run per cell, each judged alone
        return s
    for c in cells.values():
        base = cells[base_of[c.name]]
        for m in METRICS:  # a diagnostic gets its ratio and interval, never a verdict
            c.vs_base[m.name] = paired(base, c, m.name, m.higher_is_better)
    _decide(s)
    return s


def paired(a: CellSummary, b: CellSummary, metric: str, higher: bool | None) -> stats.Comparison:
    """B vs A over the rounds (or duets) both completed; a failed run drops only its own pair."""
    va, vb = a.by_pair.get(metric, {}), b.by_pair.get(metric, {})
    keys = sorted(set(va) & set(vb))
    return stats.compare([va[k] for k in keys], [vb[k] for k in keys], higher, paired=True)


def _decide(s: Summary) -> None:
    """One Holm family: every non-baseline cell x every ranked metric with an interval, but the figures a fixed
    offered load holds fixed (labelled as such, never judged)."""
    held = set(HELD_BY_LOAD) if offered(s.meta) else set()
    others = [c for c in s.cells if not s.is_baseline(c.name)]
    unlike_of = {c.name: unlike_requests(s.meta, s.rows, {c.name, s.baseline_of(c.name)}) - held for c in others}
    for c in others:
        for m in held:
            c.vs_base[m] = replace(c.vs_base[m], verdict=stats.HELD, p=None)
        for m in unlike_of[c.name]:
            c.vs_base[m] = replace(c.vs_base[m], verdict=stats.UNLIKE, p=None)
    metrics = [m for m in RANKED if m in set(s.present_metrics()) and m not in held]
    judged = {m: [c for c in others if m not in unlike_of[c.name]] for m in metrics}
    metrics = [m for m in metrics if judged[m]]
    s.floors = {
        m: stats.noise_floor([c.vs_base[m] for c in judged[m]], resolution=BY_NAME[m].resolution) for m in metrics
    }
    family = [(c, m) for m in metrics for c in judged[m]]
    decided = stats.decide(
        [c.vs_base[m] for c, m in family],
        [BY_NAME[m].better == "higher" for _, m in family],
        [s.floors[m] for _, m in family],
        s.alpha,
    )
    for (c, m), cmp_ in zip(family, decided, strict=True):
        c.vs_base[m] = cmp_
        s.verdicts.append(Verdict(c.name, m, cmp_))
    present = set(s.present_metrics())
    for fig in METRICS:
        for c in others:
            cmp_ = c.vs_base[fig.name]
            # a rate of zero (no bytes moved) is not shown
            fixed = cmp_.verdict in (stats.HELD, stats.UNLIKE) and cmp_.has_ci
            if fig.name in present and (
                fixed or (fig.role == "compared" and cmp_.verdict in (stats.BETTER, stats.WORSE))
            ):
                s.others.append(Verdict(c.name, fig.name, cmp_, holm=False))


def load(run_dir: Path) -> Summary:
    meta, rows = read_run(run_dir)
    return summarize(meta, rows)
