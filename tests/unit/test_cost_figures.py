"""figures.cost_figures: what a server's whole process tree cost over a window, divided by whose count, and the
server's own CPU figure held against it."""

from __future__ import annotations

from xferbench.measure import figures

CLOCK = "cgroup v1 cpuacct.usage (ns)"


def _tree(cpu_s: float, procs: int = 1) -> dict[str, float | None]:
    return {"server_cpu_s": cpu_s, "server_cpu_span_s": 10.0, "procs_peak": procs, "rss_peak_bytes": 1e7,
            "rss_mean_bytes": None}


def test_the_servers_own_count_divides_where_it_keeps_one() -> None:
    out = figures.cost_figures(_tree(2.0), {"server_requests": 4000, "client_requests": 1000}, CLOCK)
    assert out["server_cpu_cores"] == 0.2 and out["cpu_clock"] == CLOCK
    assert out["server_cpu_per_request_s"] == 2.0 / 4000 and out["cpu_requests_from"] == "server"
    assert out["server_cpu_per_op_s"] == 2.0 / 1000  # always the client's operations
    assert out["rss_peak_bytes"] == 1e7 and "rss_mean_bytes" not in out  # a figure it lacks leaves the server's


def test_the_clients_count_divides_for_a_server_that_counts_nothing() -> None:
    out = figures.cost_figures(_tree(2.0), {"server_requests": None, "client_requests": 1000}, CLOCK)
    assert out["server_cpu_per_request_s"] == 2.0 / 1000 and out["cpu_requests_from"] == "client"
    assert out["warnings"] == [] and "cpu_selfreport_ratio" not in out


def test_a_one_process_server_whose_own_figure_disagrees_is_warned_about() -> None:
    agree = figures.cost_figures(_tree(2.0), {"server_cpu_cores": 0.203, "client_requests": 10}, CLOCK)
    assert agree["warnings"] == [] and abs(agree["cpu_selfreport_ratio"] - 1.015) < 1e-9
    off = figures.cost_figures(_tree(2.0), {"server_cpu_cores": 0.1, "client_requests": 10}, CLOCK)
    assert off["cpu_selfreport_ratio"] == 0.5 and "beyond the 5% tolerance" in off["warnings"][0]
    # Workers beside it: its own process is a part of the tree, so only the ratio is recorded.
    forking = figures.cost_figures(_tree(2.0, procs=3), {"server_cpu_cores": 0.1, "client_requests": 10}, CLOCK)
    assert forking["cpu_selfreport_ratio"] == 0.5 and forking["warnings"] == []


def test_too_few_samples_leave_the_servers_own_figures_standing() -> None:
    out = figures.cost_figures({"server_cpu_s": None, "server_cpu_span_s": None, "rss_peak_bytes": None}, {}, CLOCK)
    assert out == {"warnings": []}
