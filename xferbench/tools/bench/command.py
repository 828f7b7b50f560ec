"""`xferbench bench`: measure every case in alternating rounds, append the record to the history, name what
moved since the previous record of this machine class; `--markdown` rewrites BENCHMARKS.md's section, and
`--compare OLD NEW` names what moved between any two records, both without measuring."""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from xferbench.config.files import ROOT
from xferbench.tools.bench import cases as base
from xferbench.tools.bench import compare, render, tlscase, tools, verdicts
from xferbench.tools.bench.cases import Ctx
from xferbench.tools.bench.record import (
    BUSY_LOAD,
    HISTORY,
    Figure,
    Record,
    append,
    check_finite,
    commit,
    load1,
    machine,
    machine_class,
    previous,
    read,
    utc_now,
)

BENCHMARKS = ROOT / "BENCHMARKS.md"
# Every case by its --cases name, in the order a round runs them: cases.py's, and the TLS one of tlscase.py.
CASES: dict[str, Callable[[Ctx, int], None]] = {
    "frame": base.frame,
    "grpc": base.grpc,
    "generators": base.generators,
    "allocators": base.allocators,
    "lab": base.lab,
    "tls": tlscase.tls_case,
}
SMOKE_CASES = tuple(CASES)  # every case, each cut to a subset of its figures (Ctx.smoke)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bench",
        help="the headline figures as ratios to anchors, appended to bench-records/history.jsonl",
        description=(__doc__ or "").split("\n\n")[0],
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds, subject and anchor alternating (default 5: the fewest with which two records can be compared)",
    )
    p.add_argument("--window", type=float, default=2.0, help="seconds per measured run (default 2)")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)} (default: all)")
    p.add_argument("--no-run", action="store_true", help="leave out make run's verdict table (3.5 min)")
    p.add_argument("--history", type=Path, default=HISTORY, help="the history file (default bench-records/history.jsonl)")
    p.add_argument("--force", action="store_true", help=f"start even with a one-minute load above {BUSY_LOAD}")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="~20 s: 1 round, 1 s windows, a subset of figures, no run; needs a --history elsewhere",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("OLD", "NEW"),
        help="measure nothing: compare two records of --history and print make bench's closing table. Each is an"
        " index (0 the oldest, -1 the latest, -2 the one before; at most 3 digits) or a commit prefix of 4 or"
        " more characters that names one record (two records of one commit: pick by index)",
    )
    p.add_argument(
        "--markdown",
        action="store_true",
        help="measure nothing: rewrite BENCHMARKS.md's generated section from the latest record",
    )
    p.set_defaults(fn=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    console = Console()
    if not console.is_terminal:  # logs and CI: wide enough that the table does not wrap (as cli._console)
        console = Console(width=160)
    history_path: Path = args.history.resolve()
    if args.markdown:
        return _markdown(console, history_path)
    if args.compare:
        return compare_records(console, history_path, *args.compare)
    if args.smoke:
        if history_path == HISTORY.resolve():
            console.print("[red]--smoke writes a throw-away record: give --history a path other than the committed one")
            return 2
        args.rounds, args.window, args.no_run, args.cases = 1, 1.0, True, ",".join(SMOKE_CASES)
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown or args.rounds < 1 or args.window <= 0:
        console.print(f"[red]bad arguments: unknown cases {unknown}, rounds {args.rounds}, window {args.window}")
        return 2
    if tools.missing():
        console.print(f"[red]missing {', '.join(tools.missing())}: run `make build`")
        return 2
    before = load1()
    if before > BUSY_LOAD and not args.force:
        console.print(f"[red]one-minute load is {before:.2f} (> {BUSY_LOAD}): refusing to measure; --force to go on")
        return 2
    rec = measure(console, args, cases, before)
    hist = read(history_path)
    append(history_path, rec)
    prev = previous(hist, rec)
    render.show(console, rec, compare.compare(prev, rec), prev)
    console.print(f"record appended to {history_path}")
    return 0


def measure(console: Console, args: argparse.Namespace, cases: list[str], before: float) -> Record:
    tmp = Path(tempfile.mkdtemp(prefix="bench-", dir=ROOT / "build"))  # on the disk the repository is on
    t0 = time.monotonic()
    ctx = Ctx(args.window, tmp, args.smoke, console.print)
    try:
        tools.ghz_inputs(tmp)
        cols = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
        )
        with Progress(*cols, console=console) as bar:
            ctx.say = lambda s: bar.console.print(f"  {s}")
            task = bar.add_task("bench", total=args.rounds * len(cases) + (0 if args.no_run else 1))
            for r in range(1, args.rounds + 1):
                for name in cases:
                    bar.update(task, description=f"round {r}/{args.rounds}: {name}")
                    CASES[name](ctx, r)
                    bar.advance(task)
            figures = [Figure.of(s) for s in ctx.samples.values()]
            if not args.no_run:
                bar.update(task, description="make run: xferbench run experiments/quick.toml")
                try:
                    figures += verdicts.run_quick(tmp / "run")
                except tools.BenchError as e:  # the rounds' figures are still worth their record
                    console.print(f"[red]make run's verdicts left out: {e}")
                bar.advance(task)
    finally:
        try:
            ctx.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    check_finite(figures)
    after = load1()
    console.print(f"measured in {time.monotonic() - t0:.0f} s; load {before:.2f} → {after:.2f}")
    return Record(commit(), utc_now(), machine(), before, after, figures, mode="smoke" if args.smoke else "full")


def _markdown(console: Console, history_path: Path) -> int:
    hist = read(history_path)
    full = [r for r in hist if r.mode == "full"]
    if not full:
        console.print(f"[red]{history_path} holds no full record yet: run `make bench` first")
        return 1
    render.rewrite(BENCHMARKS, full[-1])
    console.print(f"{BENCHMARKS.name}: headline section from {full[-1].commit} ({full[-1].date})")
    return 0


def select(hist: list[Record], key: str) -> Record:
    """The record `key` names: an index into the history (negative from its end) or a commit prefix that only
    one record's commit starts with. A short integer is an index: an all-digit commit prefix needs 4 digits."""
    if re.fullmatch(r"-?\d{1,3}", key):
        i = int(key)
        if not -len(hist) <= i < len(hist):
            raise LookupError(f"index {i} is outside the history's {len(hist)} records")
        return hist[i]
    if len(key) < 4:
        raise LookupError(f"{key!r}: give an index (e.g. -1) or a commit prefix of 4 or more characters")
    found = [(i, r) for i, r in enumerate(hist) if r.commit.startswith(key)]
    if len(found) != 1:
        where = ", ".join(f"{i} ({r.commit}, {r.date})" for i, r in found) or "none"
        raise LookupError(f"commit prefix {key!r} names {len(found)} records, not one: {where}; give an index")
    return found[0][1]


def compare_records(console: Console, history_path: Path, old_key: str, new_key: str) -> int:
    """Compares two records of the history as a bench compares itself with its previous record."""
    hist = read(history_path)
    try:
        old, new = select(hist, old_key), select(hist, new_key)
    except LookupError as e:
        console.print(f"[red]{history_path}: {e}")
        return 2
    if old.mode != new.mode or machine_class(old.machine) != machine_class(new.machine):
        console.print(
            f"[yellow]the two records differ in mode ({old.mode}, {new.mode}) or machine class"
            f" ({machine_class(old.machine)}, {machine_class(new.machine)}): what moved may be the machine"
        )
    render.show(console, new, compare.compare(old, new), old)
    return 0
