"""The report's Hosts section and the Placement line's clocks: per configuration and host, its roles and the medians
of its own figures (windows of this machine's real /proc samples), a figure no run could read shown as missing with
its reason, never 0; no section without hosts; the clock offsets at the start and the end of the sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import HostFacts, Placement, RunMeta
from xferbench.analysis.summary import summarize
from xferbench.measure import hoststat
from xferbench.report import hosts, html, tables


def _window() -> dict[str, Any]:
    a = hoststat.sample()
    b = hoststat.sample()
    b["mono"] = a["mono"] + 2.0  # two seconds: the counters' deltas are whatever moved between the reads
    return hoststat.window(a, b)


def _rows(tcp_missing: bool = False) -> list[RunRow]:
    rows = []
    for r in (1, 2, 3):
        for cell in "AB":
            here, gen = _window(), _window()
            here["cpu"]["user"] = 0.1 * r  # medians over the repeats: 0.2
            if tcp_missing:
                gen["tcp"] = {"error": "at the window's end: /proc/net/snmp: [Errno 2] No such file or directory"}
            elif r == 3:
                gen["net"] = {"error": "no sample from its watch at the window's end"}
            row = RunRow(cell, "xferd-go", "grpc", repeat=r)
            row.set_figures(
                {
                    "client_qps": 100.0 + r,
                    "hosts": {
                        "this machine": {"roles": ["server", "master", "runner"], "address": "10.81.100.1", **here},
                        "gen": {"roles": ["load"], "address": "10.81.100.3", **gen},
                    },
                }
            )
            rows.append(row)
    return rows


def _meta(placement: Placement | None = None) -> RunMeta:
    return RunMeta(
        experiment="x",
        cells=["A", "B"],
        baseline="A",
        cell_configs={c: {"server": "xferd-go", "transport": "grpc"} for c in "AB"},
        placement=placement,
    )


def _section(text: str) -> list[str]:
    return text[text.index("## Hosts") :].split("\n## ")[0].splitlines()


def _cells(lines: list[str], start: str) -> list[str]:
    """The cells of the table line that starts with `start`, by HEAD's columns."""
    line = next(x for x in lines if x.startswith(start))
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_each_configuration_and_host_with_its_roles_and_medians() -> None:
    text = tables.markdown(summarize(_meta(), _rows()))
    lines = _section(text)
    here = _cells(lines, "| `B` | this machine |")
    assert here[2] == "server, master, runner" and here[4] == "0.20", here  # user cores: the median of .1, .2, .3
    gen = _cells(lines, "| `A` | gen |")
    assert gen[2] == "load" and gen[3] == str(len(hoststat.sample()["cpu_ids"])), gen
    assert gen[11].endswith(" (2 of 3)"), gen  # received: the two runs whose windows read the network
    assert text.index("## Hosts") < text.index("## Verdicts")  # below the header and its Placement line


def test_a_figure_no_run_could_read_is_missing_with_its_reason() -> None:
    lines = _section(tables.markdown(summarize(_meta(), _rows(tcp_missing=True))))
    gen = _cells(lines, "| `A` | gen |")
    assert gen[15] == "missing: at the window's end: /proc/net/snmp: [Errno 2] No such file or directory", gen
    assert gen[16:18] == ["", ""] and "0" not in gen[16:18], gen


def test_html_has_the_section_and_none_without_hosts(tmp_path: Path) -> None:
    page = html.render(summarize(_meta(), _rows()), tmp_path)
    assert "<h2>Hosts</h2>" in page and "<td class='l'>server, master, runner</td>" in page
    plain = [RunRow(c, "xferd-go", "grpc", repeat=r, client_qps=100.0) for r in (1, 2) for c in "AB"]
    s = summarize(_meta(), plain)
    assert not hosts.shown(s) and "## Hosts" not in tables.markdown(s)
    assert "<h2>Hosts</h2>" not in html.render(s, tmp_path)


def test_the_placement_line_has_the_clock_at_start_and_at_end() -> None:
    gen = HostFacts(
        "gen", "lab2", roles=["load"], address="10.81.100.3", cpus=1, clock_offset_s=0.0002, clock_uncertainty_s=0.0003
    )
    app = HostFacts(
        "app", "lab1", roles=["server"], address="10.81.100.2", clock_offset_s=-0.00004, clock_uncertainty_s=0.000025
    )
    assert "clock +200 µs ± 300 µs)" in gen.describe()  # the sweep not ended: the check's alone
    gen.clock_end_offset_s, gen.clock_end_uncertainty_s = 0.0015, 0.0002
    app.clock_end_error = "ssh: connect to host 10.81.100.2 port 22: No route to host"
    text = Placement("10.81.100.1", [app, gen]).describe()
    assert "gen (10.81.100.3: 1 CPU, clock +200 µs ± 300 µs at start, +1.5 ms ± 200 µs at end)" in text, text
    assert "clock -40 µs ± 25 µs at start, ? (ssh: connect to host 10.81.100.2 port 22: No route to host) at end" in text
    header = dict(tables.header(summarize(_meta(Placement("10.81.100.1", [app, gen])), _rows())))
    assert header["Placement"] == text
