"""figures.cost_figures: what a server's whole process tree cost over a window, divided by whose count, and the
server's own CPU figure held against it."""

from __future__ import annotations

from xferbench.measure import figures
from xferbench.measure.tree import Sample, Window, window_figures

CLOCK = "cgroup v1 cpuacct.usage (ns)"


def _tree(cpu_s: float, procs: int = 1) -> Window:
    """A window of the tree that measured no mean RSS."""
    return Window({"procs_peak": procs, "rss_peak_bytes": 1e7}, cpu_s, 10.0)


def test_the_servers_own_count_divides_where_it_keeps_one() -> None:
    out, warned = figures.cost_figures(_tree(2.0), {"server_requests": 4000, "client_requests": 1000}, CLOCK)
    assert out["server_cpu_cores"] == 0.2 and out["cpu_clock"] == CLOCK
    assert out["server_cpu_per_request_s"] == 2.0 / 4000 and out["cpu_requests_from"] == "server"
    assert out["server_cpu_per_op_s"] == 2.0 / 1000  # always the client's operations
    assert out["rss_peak_bytes"] == 1e7 and "rss_mean_bytes" not in out  # a figure it lacks leaves the server's
    assert warned == []


def test_the_clients_count_divides_for_a_server_that_counts_nothing() -> None:
    out, warned = figures.cost_figures(_tree(2.0), {"server_requests": None, "client_requests": 1000}, CLOCK)
    assert out["server_cpu_per_request_s"] == 2.0 / 1000 and out["cpu_requests_from"] == "client"
    assert warned == [] and "cpu_selfreport_ratio" not in out


def test_a_one_process_server_whose_own_figure_disagrees_is_warned_about() -> None:
    agree, warned = figures.cost_figures(_tree(2.0), {"server_cpu_cores": 0.203, "client_requests": 10}, CLOCK)
    assert warned == [] and abs(agree["cpu_selfreport_ratio"] - 1.015) < 1e-9
    off, warned = figures.cost_figures(_tree(2.0), {"server_cpu_cores": 0.1, "client_requests": 10}, CLOCK)
    assert off["cpu_selfreport_ratio"] == 0.5 and "beyond the 5% tolerance" in warned[0]
    # Workers beside it: its own process is a part of the tree, so only the ratio is recorded.
    forking, warned = figures.cost_figures(_tree(2.0, procs=3), {"server_cpu_cores": 0.1, "client_requests": 10}, CLOCK)
    assert forking["cpu_selfreport_ratio"] == 0.5 and warned == []


def test_too_few_samples_leave_the_servers_own_figures_standing() -> None:
    assert figures.cost_figures(Window({}), {}, CLOCK) == ({}, [])


def test_the_tree_window_gives_only_what_its_samples_measured() -> None:
    assert window_figures([], 0.0, 10.0) == Window({})
    one = Sample(5.0, 1.0, 100, 3, 10, 20, 7, 1)
    alone = window_figures([one], 0.0, 10.0)
    assert alone == Window({"rss_peak_bytes": 100, "proc_threads_peak": 3, "proc_fds_peak": 7, "procs_peak": 1})
    two = window_figures([one, Sample(7.0, 2.0, 300, 4, 30, 60, 9, 2)], 0.0, 10.0)
    assert (two.cpu_s, two.span_s) == (1.0, 2.0)
    assert two.figures == {"rss_peak_bytes": 300, "proc_threads_peak": 4, "proc_fds_peak": 9, "procs_peak": 2,
                           "rss_mean_bytes": 200.0, "proc_ctx_switches_per_s": 10.0, "proc_page_faults_per_s": 20.0}


TICK_S = 0.01  # /proc's clock step (USER_HZ)


def _ticked(cpu_s: float, procs: int = 1) -> Window:
    """A window read from /proc: its CPU known to within a step per process and one for the reaped children."""
    return Window({"procs_peak": procs}, cpu_s, 10.0, TICK_S * (procs + 1))


def test_the_tree_window_states_what_its_clocks_step_can_make_its_cpu_wrong_by() -> None:
    a, b = Sample(5.0, 1.0, 100, 3, 10, 20, 7, 1), Sample(7.0, 1.5, 100, 3, 10, 20, 7, 3)
    assert window_figures([a, b], 0.0, 10.0).cpu_error_s is None  # a nanosecond clock
    assert window_figures([a, b], 0.0, 10.0, TICK_S).cpu_error_s == TICK_S * 4  # 3 processes and their children


def test_cpu_under_two_steps_of_a_tick_clock_is_a_bound_never_zero() -> None:
    measured = {"server_requests": 400, "client_requests": 400, "client_bytes_per_s": float(1 << 20),
                "bounds": {"server_p95_s": 1e-5}}
    out, _ = figures.cost_figures(_ticked(0.0), measured, CLOCK)
    for key in ("server_cpu_cores", "server_cpu_per_request_s", "server_cpu_per_op_s", "server_cpu_per_gib_s"):
        assert out[key] is None, key  # not 0: a light server is not free
    bounds = out["bounds"]
    assert bounds["server_cpu_per_request_s"] == 0.02 / 400 and bounds["server_cpu_cores"] == 0.02 / 10.0
    assert bounds["server_cpu_per_gib_s"] == 0.02 / (10.0 / 1024)  # 10 MiB moved in the window
    assert bounds["server_p95_s"] == 1e-5  # the quantile's bound kept beside them
    # 3 ticks against an error of 2: within half of it, still a bound (the value plus its error).
    out, _ = figures.cost_figures(_ticked(0.03), measured, CLOCK)
    assert out["server_cpu_per_request_s"] is None and out["bounds"]["server_cpu_per_request_s"] == 0.05 / 400


def test_cpu_of_many_ticks_is_a_value() -> None:
    out, _ = figures.cost_figures(_ticked(0.04), {"server_requests": 400}, CLOCK)
    assert out["server_cpu_per_request_s"] == 0.04 / 400 and "bounds" not in out
    out, _ = figures.cost_figures(Window({}, 0.0, 10.0, None), {"server_requests": 400}, CLOCK)
    assert out["server_cpu_per_request_s"] == 0.0 and "bounds" not in out  # a nanosecond clock's 0 is a value
