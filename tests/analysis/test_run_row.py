"""runs.jsonl rows as `RunRow`s: a line written before the type existed still loads, a rewrite keeps every
key (unknown ones too), and a line that is not a row says what is wrong with it."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from xferbench import cli
from xferbench.analysis import summary
from xferbench.analysis.metrics import METRICS
from xferbench.analysis.row import FIELD_NAMES, FIGURE_NAMES, Figures, RunRow

# A row as the runner wrote it before RunRow (a free dict): the keys of a failed run, and of an ok run with
# a few figures and a key this version does not know.
OLD_FAILED = {
    "experiment": "quick", "cell": "c-glibc/frame", "repeat": 2, "order": 5, "pair": "r2", "server": "xferd-c",
    "transport": "frame", "axes": {"alloc": "glibc"}, "config": {"server": "xferd-c"}, "status": "failed",
    "error": "xferd-c exited with status 2 before it was ready", "stderr_tail": ["xferd-c: error: --alloc nope"],
    "warnings": [], "source": "scrape", "started_at": "2026-01-01T00:00:00+00:00", "warmup_s": 5,
    "duration_s": None, "ready": None, "build_info": None,
}
OLD_OK = {
    **OLD_FAILED, "status": "ok", "error": None, "stderr_tail": None, "pids": {"server": 10, "locust": 11},
    "client_qps": 79.5, "server_cpu_per_request_s": 0.0012, "gen_cpu_cores": 0.41,
    "client_methods": {"Echo": {"qps": 40.0, "p50_s": 0.001, "p95_s": 0.002, "p99_s": 0.003}},
    "some_future_figure": [1, 2],
}


def test_an_old_row_loads_and_writes_back_every_key_it_had() -> None:
    row = RunRow.from_json(OLD_OK)
    assert (row.cell, row.repeat, row.pair_key, row.client_qps, row.pids) == (
        "c-glibc/frame", 2, "r2", 79.5, {"server": 10, "locust": 11})
    assert row.figure("server_cpu_per_request_s") == 0.0012 and row.figure("client_p99_s") is None
    assert row.extra == {"some_future_figure": [1, 2]}
    out = row.to_json()
    assert {k: out[k] for k in OLD_OK} == OLD_OK  # same keys, same values
    assert set(out) == set(FIELD_NAMES) | {"some_future_figure"}  # and every field, null where unmeasured
    assert RunRow.from_json(json.loads(json.dumps(out))) == row


def test_a_row_of_an_older_writer_keeps_its_bounds_under_todays_name() -> None:
    row = RunRow.from_json({**OLD_OK, "quantile_bounds": {"server_p95_s": 0.005}})
    assert row.bounds == {"server_p95_s": 0.005} and "quantile_bounds" not in row.extra


def test_a_failed_row_keeps_its_error() -> None:
    row = RunRow.from_json(OLD_FAILED)
    assert not row.ok and row.status == "failed" and row.stderr_tail == ["xferd-c: error: --alloc nope"]
    row = RunRow("a", "xferd-go", "grpc")
    row.fail("boom", [str(i) for i in range(30)])
    assert (row.status, row.error, row.stderr_tail) == ("failed", "boom", [str(i) for i in range(10, 30)])


def test_set_figures_refuses_a_name_that_is_not_a_field() -> None:
    row = RunRow("a", "xferd-go", "grpc")
    row.set_figures({"client_qps": 5.0, "rss_peak_bytes": 1e6})
    assert (row.client_qps, row.rss_peak_bytes) == (5.0, 1e6)
    with pytest.raises(KeyError, match="client_qsp"):
        row.set_figures({"client_qsp": 5.0})


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ({"server": "xferd-c", "transport": "frame"}, "needs cell"),
        ({**OLD_OK, "status": "great"}, "status 'great' is not one of ok, failed, interrupted"),
    ],
)
def test_a_line_that_is_not_a_row_says_why(line: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        RunRow.from_json(line)


def test_report_names_the_file_and_line_of_a_bad_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs.jsonl").write_text(json.dumps(OLD_OK) + "\n" + "{not json\n")
    with pytest.raises(summary.RunDirError, match=r"runs\.jsonl:2: "):
        summary.load(tmp_path)
    assert cli.main(["report", str(tmp_path)]) == 2
    assert f"{tmp_path / 'runs.jsonl'}:2:" in capsys.readouterr().err.replace("\n", "")


# RunRow's fields that say which run a row is and how it went, not what it measured: never a `Figures` key.
NOT_FIGURES = {"cell", "server", "transport", "experiment", "repeat", "order", "pair", "axes", "config", "source",
               "started_at", "warmup_s", "status", "error", "stderr_tail", "warnings", "ready", "pids", "cpus",
               "network", "container"}


def test_every_figure_is_a_run_row_field_of_the_same_type() -> None:
    """What mypy checks a figure's name and value against (Figures) is what the row keeps (RunRow)."""
    row, figs = typing.get_type_hints(RunRow), typing.get_type_hints(Figures)
    assert set(figs) <= set(FIELD_NAMES), set(figs) - set(FIELD_NAMES)
    assert {k: t for k, t in figs.items() if t != row[k]} == {}
    assert FIGURE_NAMES == tuple(figs)


def test_every_run_row_field_is_a_figure_or_says_which_run_it_is() -> None:
    assert set(FIELD_NAMES) - set(FIGURE_NAMES) == NOT_FIGURES


def test_every_metric_of_the_table_is_a_figure() -> None:
    assert [m.name for m in METRICS if m.name not in FIGURE_NAMES] == []


def test_set_figures_refuses_a_field_that_is_not_a_figure() -> None:
    row = RunRow("a", "xferd-go", "grpc")
    with pytest.raises(KeyError, match="'cell'"):
        row.set_figures({"cell": "b"})  # type: ignore[typeddict-unknown-key]
    assert row.cell == "a"
