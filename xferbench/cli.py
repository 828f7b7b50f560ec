"""The `xferbench` command: run, compare, report, list, hosts, stack, cost, export, images, bench."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from py_client.durations import DURATION_HELP, parse_duration
from xferbench import config
from xferbench.analysis import stats
from xferbench.analysis.metrics import BY_NAME, RANKED
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.analysis.summary import RunDirError, summarize
from xferbench.tools import cost, export, stack
from xferbench.tools.bench import command as bench

if TYPE_CHECKING:
    from xferbench.analysis.runmeta import Placement
    from xferbench.measure.sources import MetricsSource
    from xferbench.run.sweep import SweepResult

EXIT_INTERRUPTED = 130
EXIT_SOME_RUNS_FAILED = 3  # `xferbench run`: the report exists, but some runs failed (all failed: 1)


def _console() -> Console:
    c = Console(stderr=False)
    if not c.is_terminal:  # logs and CI: wide enough that tables do not wrap into unreadable columns
        c = Console(stderr=False, width=200)
    return c


# Precision by default: an experiment that compares configurations over enough rounds for an interval adds
# rounds until its ranked intervals are this narrow, within a budget of as long again as its own rounds took.
DEFAULT_UNTIL_CI = 0.05


def _default_until_ci(exp: config.Experiment, quick: bool) -> float | None:
    """--until-ci's default: on for a comparison of 3+ repeats; off for a smoke (--quick, fewer repeats), a
    soak (it ranks nothing) and a run of one configuration (nothing to compare)."""
    compares = len(exp.cells) >= 2 or exp.aa_cell is not None
    if quick or exp.soak is not None or exp.repeats < stats.MIN_REPEATS or not compares:
        return None
    return DEFAULT_UNTIL_CI


def ranked_comparisons(meta: RunMeta, rows: list[RunRow]) -> tuple[str, list[stats.Comparison]]:
    """--until-ci's question after each round, answered by the report's summary: the rank metric and each
    cell's comparison with the baseline on it (sweep.UntilCI.ranked)."""
    s = summarize(meta, rows)
    return s.rank_metric, [v.comparison for v in s.verdicts if v.metric == s.rank_metric]


def _refuse(err: Console, text: str) -> int:
    # Wrapped to the terminal's width on a terminal; one line each in a log or a pipe, where a wrap at 80
    # columns would cut a path or a key in two.
    # The text is escaped: "[hosts.gen3]", "[servers.limits]" are TOML tables, not rich's markup.
    err.print(f"[red]error:[/] {escape(text)}", highlight=False, soft_wrap=not err.is_terminal)
    return 2


def _checked_experiment(args: argparse.Namespace, err: Console) -> config.Experiment | None:
    """The experiment with the command line's overrides, or None once a refusal is printed: an unreadable
    file, limits without containers, a server that cannot be profiled, no container engine."""
    from xferbench.run import serverstart
    try:
        exp = config.load_file(args.experiment).with_overrides(repeats=args.repeat, quick=args.quick,
                                                                   profile=args.profile)
    except config.ExperimentError as e:
        _refuse(err, str(e))
        return None
    if args.backend:
        limited = [c.name for c in exp.cells if c.limits != config.Limits()]
        if args.backend != "docker" and limited:
            _refuse(err, f"--backend {args.backend}: cell {limited[0]!r} has [servers.limits], which only "
                    "containers get (--backend docker)")
            return None
        remote = [c.name for c in exp.cells if c.load.hosts and c.host is None]
        if args.backend == "docker" and remote:
            _refuse(err, f"--backend docker: cell {remote[0]!r} has its load on other hosts ([load] hosts), and servers "
                    "in containers on this machine take a load from this machine only")
            return None
        secure = [c.name for c in exp.cells if c.load.tls != "off"]
        if args.backend == "docker" and secure:
            _refuse(err, f"--backend docker: cell {secure[0]!r} has load.tls, and the run's certificate is a file of "
                    "this machine, not in a container")
            return None
        bare = [c for c in exp.cells if c.host is not None and exp.hosts[c.host].engine is None]
        if args.backend == "docker" and bare:
            _refuse(err, f"--backend docker: cell {bare[0].name!r} runs on {bare[0].host}, and [hosts.{bare[0].host}] "
                    "names no engine for its container (engine = \"unix:///PATH\", its socket there)")
            return None
        exp = dataclasses.replace(exp, backend=args.backend)
    if exp.profile:
        from xferbench.measure import profile

        try:
            profile.check(c.kind for c in exp.cells)
        except profile.ProfileError as e:
            _refuse(err, str(e))
            return None
    if exp.backend == "docker":
        from xferbench.run.containers.engine import EngineError

        try:
            serverstart.container_engine(exp)
        except EngineError as e:
            _refuse(err, f"backend docker: {e}")
            return None
    return exp


def _metrics_source(args: argparse.Namespace, err: Console) -> MetricsSource | None:
    """The built-in scraper, or --prometheus's PromQL once it answered; None once a refusal is printed."""
    from xferbench.measure.sources import PromQLError, PromQLSource, ScrapeSource
    from xferbench.measure.targets import FileSDRegistry

    if not args.prometheus:
        return ScrapeSource()
    promql = PromQLSource(args.prometheus)
    try:
        promql.check()  # first: an unreachable URL is the likelier mistake, and says most
        promql.register = FileSDRegistry(args.prometheus_sd) if args.prometheus_sd else stack.registry()
    except (PromQLError, stack.StackError) as e:
        _refuse(err, f"--prometheus: {e}")
        return None
    return promql


def _run_exit_status(res: SweepResult, run_dir: Path) -> int:
    """Prints the run's final table and where its report is; the exit status says how the sweep ended."""
    from xferbench.progress import final_table
    from xferbench.report import artifacts

    s = artifacts.write_all(run_dir)
    out = _console()
    out.print(final_table(s))
    failed = res.failed
    if failed:
        out.print(f"[red]{len(failed)} of {len(res.rows)} runs failed[/] (see summary.md)")
    out.print(f"report: {run_dir / 'report.html'}", highlight=False, soft_wrap=True)
    if res.interrupted:
        return EXIT_INTERRUPTED
    if not failed:
        return 0
    return 1 if len(failed) == len(res.rows) else EXIT_SOME_RUNS_FAILED


def _probe(exp: config.Experiment) -> str | None:
    """What every run of a cell would fail on (xferbench/run/preflight.py), found before the first run: the
    refusal's text, or None."""
    from xferbench.run import preflight

    try:
        preflight.check(exp)
    except preflight.PreflightError as e:
        return f"{e} (no run was started; --no-probe skips this check)"
    return None


def _host_check(exp: config.Experiment, err: Console) -> Placement | None:
    """The host check of an experiment with [hosts] (xferbench/run/hostcheck.py): the placement, or None once
    the refusal naming the host is printed."""
    from xferbench.run import hostcheck

    err.print(f"checking hosts {escape(', '.join(exp.hosts))} over ssh", highlight=False)
    try:
        return hostcheck.check(exp)
    except hostcheck.HostCheckError as e:
        _refuse(err, f"host check: {e}")
        return None


def cmd_run(args: argparse.Namespace) -> int:
    from xferbench.progress import RichProgress
    from xferbench.run import sweep

    err = Console(stderr=True)
    exp = _checked_experiment(args, err)
    if exp is None:
        return 2
    here = [c for c in exp.cells if not (c.host and c.kind.launcher == "command")]  # a command on a host: the host's
    missing = [] if exp.backend == "docker" else sorted({c.binary for c in here if not Path(c.binary).exists()})
    for b in missing:
        err.print(f"[yellow]warning:[/] {b} does not exist (run `make build`); its cells will fail", highlight=False)
    source = _metrics_source(args, err)
    if source is None:
        return 2
    run_dir = Path(args.out) if args.out else Path(args.results) / f"{sweep.utc_stamp()}-{exp.name}"
    if run_dir.exists() and any(run_dir.iterdir()):
        return _refuse(err, f"{run_dir} exists and is not empty")
    placement = None
    if exp.hosts:  # before any server starts: a host that cannot take its part is the likelier mistake
        placement = _host_check(exp, err)
        if placement is None:
            return 2
    if not args.no_probe and (refusal := _probe(exp)):
        return _refuse(err, refusal)
    until = None
    target = args.until_ci if args.until_ci is not None else _default_until_ci(exp, args.quick)
    if target:
        until = sweep.UntilCI(target, args.budget, ranked_comparisons)
        if exp.repeats < stats.MIN_REPEATS:
            exp = exp.with_overrides(repeats=stats.MIN_REPEATS)  # the first interval needs 3 rounds
    res = sweep.sweep(exp, run_dir, source=source, progress=RichProgress(err), until_ci=until, placement=placement)
    return _run_exit_status(res, run_dir)


def cmd_report(args: argparse.Namespace) -> int:
    from xferbench.progress import final_table
    from xferbench.report import artifacts

    run_dir = Path(args.run_dir)
    if not (run_dir / "runs.jsonl").exists():
        return _refuse(Console(stderr=True), f"{run_dir} has no runs.jsonl")
    try:
        s = artifacts.write_all(run_dir)
    except RunDirError as e:
        return _refuse(Console(stderr=True), str(e))
    _console().print(final_table(s))
    _console().print(f"report: {run_dir / 'report.html'}", highlight=False, soft_wrap=True)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from xferbench.analysis import summary
    from xferbench.report import compare

    a_dir, b_dir = Path(args.run_a), Path(args.run_b)
    err = Console(stderr=True)
    for d in (a_dir, b_dir):
        if not (d / "runs.jsonl").exists():
            return _refuse(err, f"{d} has no runs.jsonl")
    try:
        sa, sb = summary.load(a_dir), summary.load(b_dir)
        compare.check_comparable(sa, sb, a_dir, b_dir)
        pairs = compare.paired_cells(sa, sb)
    except (RunDirError, compare.CompareError) as e:
        return _refuse(err, str(e))
    for name, diffs in compare.config_differences(a_dir, b_dir, pairs).items():
        err.print(f"[yellow]note:[/] {name} ran different configurations in A and B: {'; '.join(diffs)}",
                  highlight=False)
    metrics = [m for m in (args.metric or RANKED) if m in BY_NAME]
    _console().print(compare.table(compare.family(pairs, metrics), a_dir, b_dir))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    t = Table(title=f"experiments in {config.EXPERIMENTS_DIR}")
    for col in ("name", "file", "cells", "repeats", "≈ minutes", "description"):
        t.add_column(col)
    status = 0
    for p in config.shipped():
        where = str(p.relative_to(config.EXPERIMENTS_DIR))
        try:
            e = config.load_file(p)
        except config.ExperimentError as err:
            t.add_row(p.stem, where, "-", "-", "-", f"[red]{err}[/]")
            status = 1
            continue
        t.add_row(e.name, where, str(len(e.cells)), str(e.repeats), f"{e.estimated_seconds() / 60:.1f}",
                  e.description)
    _console().print(t)
    return status


def cmd_hosts_check(args: argparse.Namespace) -> int:
    """`xferbench hosts check EXPERIMENT`: what `xferbench run` checks of its [hosts] before the first cell."""
    err = Console(stderr=True)
    try:
        exp = config.load_file(args.experiment)
    except config.ExperimentError as e:
        return _refuse(err, str(e))
    if not exp.hosts:
        return _refuse(err, f"{args.experiment}: no [hosts.NAME] table; nothing to check")
    placement = _host_check(exp, err)
    if placement is None:
        return 2
    t = Table(title=f"hosts of {exp.name}")
    for col in ("host", "ssh", "role", "address", "CPUs (free)", "kernel", "CPU model", "clock offset", "Python",
                "Locust", "project"):
        t.add_column(col)
    for f in placement.hosts:
        free = f" ({f.cpus_free:.1f})" if f.cpus_free is not None else ""
        t.add_row(f.name, f.ssh, ", ".join(f.roles) or "-", f.address or "?", f"{f.cpus}{free}", f.kernel or "?",
                  f.cpu_model or "?", f.clock_text(),
                  f"{f.python} ({f.python_version})", f.locust or "?", f.project or "?")
    out = _console()
    out.print(t)
    if placement.server_address:
        out.print(f"the servers will listen for the load on {placement.server_address}, which every load host "
                  "reached", highlight=False)
    out.print(f"placement: {placement.text}", highlight=False, soft_wrap=True)
    return 0


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want a whole number such as 3") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: want 1 or more")
    return v


def _fraction(text: str) -> float:
    """'5%' or '0.05' → 0.05; 'off' → 0."""
    t = text.strip()
    if t.lower() == "off":
        return 0.0
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want a percentage such as 5% (or 0.05)") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: want a percentage between 0% and 100%")
    return v


def _duration(text: str) -> float:
    """'10m', '90s', '1h30m', '600' → seconds (the one duration grammar, py_client/durations.py)."""
    if text.startswith("-"):
        raise argparse.ArgumentTypeError(f"{text!r}: want a positive duration")
    try:
        v = parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want a duration such as 10m, 90s or 1h ({DURATION_HELP})") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: want a positive duration")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="xferbench", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser(
        "run",
        help="run an experiment (a TOML file or a shipped name such as 'quick')",
        epilog="exit status: 0 every run measured, 3 some runs failed (report written), 1 every run failed, "
        "2 refused to start, 130 interrupted",
    )
    r.add_argument("experiment")
    r.add_argument("--out", help="the run directory (default: RESULTS/<UTC time>-<experiment>)")
    r.add_argument("--results", default="results", help="parent of run directories (default: results)")
    r.add_argument("--repeat", type=_positive_int, metavar="N", help="override the experiment's repeats")
    r.add_argument("--prometheus", metavar="URL", help="read server figures through PromQL from this Prometheus")
    r.add_argument(
        "--prometheus-sd",
        metavar="DIR",
        help="with --prometheus: write file_sd target files here for Prometheus to pick up",
    )
    r.add_argument("--backend", choices=config.BACKENDS,
                   help="process: servers as host processes; docker: each in a container (as [experiment] backend)")
    r.add_argument("--quick", action="store_true", help="short durations (CI): 1 s warm-up, 3 s measured")
    r.add_argument("--no-probe", action="store_true",
                   help="skip the check before the first run of each [load] call's methods, a user locustfile and a "
                        "command server's placeholder ports")
    r.add_argument("--profile", action="store_true",
                   help="sample the server's CPU in each measured window (as [experiment] profile = true)")
    r.add_argument(
        "--until-ci",
        type=_fraction,
        metavar="PCT",
        help="add interleaved rounds until every ranked ratio's 95%% CI is within ±PCT, within --budget; default "
             f"{DEFAULT_UNTIL_CI * 100:.0f}%% for an experiment of {stats.MIN_REPEATS}+ repeats and 2+ configurations "
             "(not with --quick, nor in a soak); off: the experiment's rounds only",
    )
    r.add_argument("--budget", type=_duration, metavar="TIME",
                   help="with --until-ci: the most the whole run may take, e.g. 10m, 90s (default: as long again as "
                        "the experiment's own rounds took)")
    r.set_defaults(fn=cmd_run)
    c = sub.add_parser("compare", help="compare two run directories cell by cell, as benchstat does")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--metric", action="append", help=f"metrics to compare (default: {', '.join(RANKED)})")
    c.set_defaults(fn=cmd_compare)
    rp = sub.add_parser("report", help="re-render summary.csv, summary.md and report.html of a run directory")
    rp.add_argument("run_dir")
    rp.set_defaults(fn=cmd_report)
    ls = sub.add_parser("list", help="list the shipped experiments")
    ls.set_defaults(fn=cmd_list)
    hs = sub.add_parser("hosts", help="the hosts of an experiment's [hosts] tables")
    hsub = hs.add_subparsers(dest="hosts_cmd", required=True)
    hc = hsub.add_parser(
        "check",
        help="check each host as `xferbench run` does before its first cell: ssh, its Python, Locust and project "
             "version, clock offset, CPUs, and that each load host reaches this machine",
        epilog="exit status: 0 every host passed, 2 a host failed (named) or the experiment was refused",
    )
    hc.add_argument("experiment")
    hc.set_defaults(fn=cmd_hosts_check)
    stack.add_parser(sub)
    cost.add_parser(sub)
    export.add_parser(sub)
    bench.add_parser(sub)
    from xferbench.run.containers import images  # the Docker SDK only when this parser is built

    images.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
