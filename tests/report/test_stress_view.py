"""The stress-matrix view (xferbench/report/stress.py): per (file size, users) the median over repeats of each
level's window, saturated levels marked with how many repeats, reconnect figures shown when recorded and
"n/a" when not; the table rows and the chart's lines, one per file size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.analysis.summary import Summary
from xferbench.report import stress

MIB = 1 << 20


def step(users: int, mib_s: float, p95: float, saturated: bool = False, **extra: Any) -> dict[str, Any]:
    return {"users": users, "note": None, "server_bytes_per_s": mib_s * MIB, "client_bytes_per_s": 1.0,
            "client_avg_s": p95 / 2, "client_p50_s": p95 / 3, "client_p95_s": p95, "client_failure_rate": 0.01,
            "gen_cpu_cores": 0.5, "gen_saturated": saturated, **extra}


def row(size: str, repeat: int, steps: list[dict[str, Any]], **extra: Any) -> RunRow:
    return RunRow(cell=f"go/frame/{size}", server="xferd-go", transport="frame", repeat=repeat,
                  config={"load": {"sizes": size, "settle_s": 8.0}}, steps=steps, extra=extra)


def summary() -> Summary:
    rows = [
        row("10MiB", 1, [step(50, 100, 0.2), step(500, 300, 2.0, saturated=True)], reconnects_per_s=4.0),
        row("10MiB", 2, [step(50, 120, 0.3), step(500, 200, 3.0)], reconnects_per_s=6.0),
        row("10MiB", 3, [step(50, 110, 0.1), step(500, 250, 1.0)]),
        row("100KiB", 1, [step(50, 40, 0.01, reconnects_per_s=0.5, time_wait_peak=12),
                          {"users": 500, "note": "no scrape of the generator showed all 500 users running"}]),
        RunRow(cell="go/frame/100KiB", server="xferd-go", transport="frame", repeat=2, status="failed"),
    ]
    return Summary(meta=RunMeta(experiment="netrpc-stress", cells=[]), rows=rows, cells=[], baseline="go/frame/100KiB")


def test_points_are_medians_by_size_then_users() -> None:
    pts = stress.points(summary())
    assert [(p.size, p.users, p.runs) for p in pts] == [("100KiB", 50, 1), ("100KiB", 500, 0), ("10MiB", 50, 3),
                                                        ("10MiB", 500, 3)]
    big = pts[3]
    assert big.values["mib_per_s"] == 250.0 and big.values["client_p95_s"] == 2.0 and big.saturated == 1
    assert pts[1].notes == ["no scrape of the generator showed all 500 users running"]


def test_table_marks_saturation_and_says_n_a_for_missing_reconnects() -> None:
    rows = {(p.size, p.users): stress.cells(p) for p in stress.points(summary())}
    head = list(stress.HEAD)
    col = {name: head.index(name) for name in head}
    assert rows[("10MiB", 500)][col["MiB/s"]] == "250.0"
    assert rows[("10MiB", 500)][col["P95"]] == "2.00 s"
    assert rows[("10MiB", 500)][col["generator"]] == "saturated 1/3"
    assert rows[("10MiB", 50)][col["generator"]] == "ok"
    assert rows[("10MiB", 50)][col["reconnects/s"]] == "5.00 (run)"  # only the runs recorded it: marked so
    assert rows[("10MiB", 50)][col["TIME_WAIT peak"]] == "n/a"
    assert rows[("100KiB", 50)][col["reconnects/s"]] == "0.50" and rows[("100KiB", 50)][col["TIME_WAIT peak"]] == "12"
    assert rows[("100KiB", 500)][col["generator"]].startswith("not measured: no scrape of the generator showed all 500")
    md = "\n".join(stress.markdown(summary()))
    assert "| 10MiB | 500 | 250.0 |" in md and "8.0s after its users were all running" in md


def test_chart_has_a_line_per_size_in_every_panel_and_a_file(tmp_path: Path) -> None:
    fig = stress.figure(summary())
    assert fig is not None
    assert len(fig.data) == 2 * len(stress.PANELS)
    mibs = [t for t in fig.data if t.showlegend]
    assert [t.name for t in mibs] == ["100KiB", "10MiB"] and list(mibs[1].y) == [110.0, 250.0]
    assert list(mibs[1].marker.symbol) == ["circle", "x"]  # the saturated level is a cross
    assert stress.write_chart(summary(), tmp_path / "stress.html")
    assert "reconnects per s" in (tmp_path / "stress.html").read_text()
    empty = Summary(meta=RunMeta(experiment="", cells=[]), rows=[RunRow(cell="c", server="xferd-go", transport="frame")],
                    cells=[], baseline="c")
    assert stress.figure(empty) is None and not stress.write_chart(empty, tmp_path / "none.html")
    assert stress.markdown(empty) == [] and stress.html(empty, include_plotlyjs=False) == ""
