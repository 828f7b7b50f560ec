"""xferbench bench's record, history and busy marking, on hand-made figures (what moved between two records:
tests/tools/test_bench_compare.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xferbench.tools.bench import compare, render
from xferbench.tools.bench.quiet import BUSY_CORES
from xferbench.tools.bench.record import Figure, Record, Samples, append, check_finite, previous, read
from xferbench.tools.bench.verdicts import read_verdicts

MACHINE = {"hostname": "a", "nproc": 2, "kernel": "6.1", "cpu": "Some CPU"}


def fig(name: str, lo: float, med: float, hi: float, better: str = "higher", busy: bool = False) -> Figure:
    return Figure(name, "ratio", better, med, lo, hi, 3, busy)


def rec(figures: list[Figure], machine: dict[str, object] | None = None, date: str = "2026-01-01T00:00:00+00:00") -> Record:
    return Record("abc1234", date, dict(machine or MACHINE), 0.2, 0.3, figures)


def test_samples_give_median_spread_and_busy() -> None:
    s = Samples("x", "ratio", "higher")
    for v, others in ((1.0, 0.01), (3.0, 0.05), (2.0, 0.1)):
        s.add(v, others)
    f = Figure.of(s)
    assert (f.median, f.lo, f.hi, f.rounds, f.busy) == (2.0, 1.0, 3.0, 3, False)
    assert f.values == (1.0, 3.0, 2.0)  # in the order measured
    assert f.aa_spread == pytest.approx(3**0.5 - 1)  # half of the log range 1..3
    s.add(2.5, BUSY_CORES + 0.1)  # one round over the threshold marks the whole figure
    assert Figure.of(s).busy
    s2 = Samples("y", "ratio", "lower")
    s2.add(1.0, BUSY_CORES)  # at the threshold, not above it
    assert not Figure.of(s2).busy


def test_busy_is_recorded_and_shown() -> None:
    r = rec([fig("quiet", 1, 1, 1), fig("noisy", 1, 1, 1, busy=True)])
    md = render.markdown(r)
    assert "| noisy | 1.000 | 1.000-1.000 | 3 | higher | busy |" in md
    assert "| quiet | 1.000 | 1.000-1.000 | 3 | higher |  |" in md


def test_history_appends_one_line_per_record_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "history.jsonl"
    assert read(path) == []
    a, b = rec([fig("x", 1, 2, 3)]), rec([fig("x", 2, 3, 4, busy=True)], date="2026-01-02T00:00:00+00:00")
    kept = Samples("y", "ratio", "lower")
    for v in (1.0, 1.25, 0.5):
        kept.add(v, 0.0)
    b = Record(b.commit, b.date, b.machine, b.load_before, b.load_after, [*b.figures, Figure.of(kept)])
    append(path, a)
    append(path, b)
    assert len(path.read_text().splitlines()) == 2
    assert read(path) == [a, b]  # the rounds come back as the tuple they were, A/A spread and all


def test_previous_is_the_latest_of_the_same_machine_class_and_mode() -> None:
    a = rec([fig("x", 1, 2, 3)], date="1")
    other = rec([fig("x", 1, 2, 3)], machine={**MACHINE, "cpu": "Other CPU"}, date="2")
    renamed = rec([fig("x", 1, 2, 3)], machine={**MACHINE, "hostname": "b"}, date="3")
    smoke = Record("abc", "4", dict(MACHINE), 0, 0, [fig("x", 1, 2, 3)], mode="smoke")
    new = rec([fig("x", 1, 2, 3)], date="5")
    assert previous([a, other, renamed, smoke], new) is renamed
    assert previous([other, smoke], new) is None


def test_a_figure_without_a_previous_value_is_new() -> None:
    moves = compare.compare(rec([fig("a", 1, 1, 1)]), rec([fig("a", 1, 1, 1), fig("b", 1, 1, 1)]))
    assert [m.verdict for m in moves] == [compare.NO_ROUNDS, compare.NEW]
    assert [m.verdict for m in compare.compare(None, rec([fig("a", 1, 1, 1)]))] == [compare.NEW]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -1.0])
def test_a_record_refuses_non_finite_or_non_positive_figures(bad: float) -> None:
    with pytest.raises(ValueError):
        check_finite([fig("x", bad, 1, 1)])


def test_markdown_rewrites_only_between_the_markers(tmp_path: Path) -> None:
    doc = tmp_path / "B.md"
    doc.write_text(f"# T\n\nintro\n\n{render.BEGIN}\nold\n{render.END}\n\n## rest\nkept\n")
    render.rewrite(doc, rec([fig("x", 1, 2, 3)]))
    text = doc.read_text()
    assert text.startswith("# T\n\nintro\n\n" + render.BEGIN) and text.endswith(render.END + "\n\n## rest\nkept\n")
    assert "old" not in text and "`abc1234`" in text and "2026-01-01T00:00:00+00:00" in text
    doc.write_text("no markers")
    with pytest.raises(ValueError):
        render.rewrite(doc, rec([]))


def test_run_verdicts_are_read_from_summary_csv(tmp_path: Path) -> None:
    """Ranked metrics with a verdict become figures (CI as spread, verdict as note); the baseline's row, a
    metric without a verdict and a diagnostic (no _p column) do not."""
    head = "cell,server,transport,runs_ok,runs_failed"
    cpu = "server_cpu_per_request_s"
    head += f",{cpu}_ratio,{cpu}_ratio_ci_lo,{cpu}_ratio_ci_hi,{cpu}_verdict,{cpu}_p"
    head += ",client_qps_ratio,client_qps_ratio_ci_lo,client_qps_ratio_ci_hi,client_qps_verdict,client_qps_p"
    head += ",client_p50_s_ratio,client_p50_s_ratio_ci_lo,client_p50_s_ratio_ci_hi,client_p50_s_verdict"
    rows = [
        "go/frame/pool=on,xferd-go,frame,5,0,1,1,1,no significant difference,,,,,,,,,,",
        "c/frame/alloc=glibc,xferd-c,frame,5,0,0.8,0.7,0.9,better,0.01,1.0,0.9,1.1,,0.5,1.1,1.0,1.2,x",
    ]
    path = tmp_path / "summary.csv"
    path.write_text("\n".join([head, *rows]) + "\n")
    figs = read_verdicts(path, busy=True, baseline="go/frame/pool=on")
    assert figs == [Figure(f"run c/frame/alloc=glibc {cpu}", "ratio", "lower", 0.8, 0.7, 0.9, 5, True, note="better")]
