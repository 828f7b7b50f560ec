"""xferd-go's `--gogc adaptive` (servers/go/internal/gctune) as a process: a burst of uploads into the memory
store grows the live heap and the GC percent it sets drops, counted in xfer_gogc_changes_total and logged at
debug level; once the burst is over the percent returns to --gogc-max. A soft memory limit stays in force
beside it, a static GOGC shows in xfer_gogc_percent too, and bad --gogc-* values are refused by name."""

from __future__ import annotations

import subprocess
import time

import pytest

from py_client import connect
from tests.support.servers import SERVERS, RunningServer, running_server, selected_servers
from xferbench.measure.scrape import Snapshot, fetch, parse_text

pytestmark = pytest.mark.skipif("xferd-go" not in selected_servers(), reason="XFERD_SERVERS leaves out xferd-go")

BURST_DEADLINE_S = 30.0  # for the percent to drop under the burst
SETTLE_DEADLINE_S = 20.0  # for it to come back once the burst is over
POLL_S = 0.1
FILE = 1 << 20
MAX_FILES = 400  # the burst stops here at the latest: 400 MiB in the store
FAST = ["--gogc", "adaptive", "--gogc-interval", "100ms", "--gogc-window", "1s", "--gogc-min", "15",
        "--gogc-max", "180", "--log-level", "debug"]


def metrics(live: RunningServer) -> Snapshot:
    return parse_text(fetch(live.metrics_url), keep_fn=lambda _name: True)


def gogc(live: RunningServer) -> tuple[float, float]:
    """(xfer_gogc_percent, xfer_gogc_changes_total)."""
    snap = metrics(live)
    pct, changes = snap.get("xfer_gogc_percent"), snap.get("xfer_gogc_changes_total")
    assert pct is not None and changes is not None, "xfer_gogc_percent or xfer_gogc_changes_total missing"
    return pct, changes


def test_a_burst_of_uploads_lowers_the_percent_then_it_returns() -> None:
    with running_server("xferd-go", [*FAST, "--store", "mem"]) as live:
        assert live.ready["gogc"] == "adaptive"
        assert (live.ready["gogc_window"], live.ready["gogc_min"], live.ready["log_level"]) == ("1s", "15", "debug")
        assert metrics(live).label_values("xfer_build_info")["gogc"] == "adaptive"  # type: ignore[index]
        assert gogc(live) == (180, 0), "an idle server starts at --gogc-max with no change"
        lowest, files = 180.0, 0
        deadline = time.monotonic() + BURST_DEADLINE_S
        payload = bytes(FILE)
        with connect(live.target("grpc"), timeout=30) as c:
            # Each file stays in the store under its own name: the live heap grows by 1 MiB per upload.
            while lowest >= 180 and files < MAX_FILES and time.monotonic() < deadline:
                for _ in range(8):
                    c.upload(f"burst-{files}", payload, chunk_size=256 << 10)
                    files += 1
                lowest = min(lowest, gogc(live)[0])
        pct, changes = gogc(live)
        assert lowest < 180, f"the percent never dropped below --gogc-max in {files} MiB of uploads"
        assert 15 <= lowest, f"percent {lowest} below --gogc-min 15"
        assert changes >= 1
        # The heap is flat now: within a few windows the percent is back at the maximum.
        deadline = time.monotonic() + SETTLE_DEADLINE_S
        while pct != 180 and time.monotonic() < deadline:
            time.sleep(POLL_S)
            pct, changes = gogc(live)
        assert pct == 180, f"percent {pct}, not back at --gogc-max {SETTLE_DEADLINE_S} s after the burst"
        assert changes >= 2
    logged = [ln for ln in live.stderr_lines if "gogc changed" in ln]
    assert len(logged) == changes, f"{changes} changes counted, {len(logged)} logged:\n" + "\n".join(logged)
    assert "to=180" in logged[-1], logged[-1]


def test_the_memory_limit_stays_in_force_beside_it() -> None:
    with running_server("xferd-go", ["--gogc", "adaptive", "--memlimit", "64MiB"]) as live:
        snap = metrics(live)
        assert snap.get("go_gc_gomemlimit_bytes") == 64 << 20
        assert snap.get("xfer_gogc_percent") == 200 and snap.get("go_gc_gogc_percent") == 200
        assert live.ready["memlimit"] == str(64 << 20)


@pytest.mark.parametrize(("args", "percent"), [(["--gogc", "50"], 50), (["--gogc", "off"], -1)])
def test_a_static_gogc_shows_in_the_gauge(args: list[str], percent: int) -> None:
    with running_server("xferd-go", args) as live:
        assert gogc(live) == (percent, 0)
    quiet = [ln for ln in live.stderr_lines if "gogc changed" in ln]
    assert not quiet, quiet


@pytest.mark.parametrize(("args", "message"), [
    (["--gogc", "adaptive", "--gogc-min", "0"], "--gogc-min 0: must be at least 1"),
    (["--gogc", "adaptive", "--gogc-min", "300"], "--gogc-min 300: must not exceed --gogc-max 200"),
    (["--gogc", "adaptive", "--gogc-window", "100ms"], "--gogc-window 100ms: must be at least --gogc-interval"),
    (["--gogc", "adaptive", "--gogc-fast-growth", "0"], "--gogc-fast-growth 0: must exceed --gogc-flat-growth 0"),
    (["--gogc", "adaptive", "--gogc-max", "20000"], "--gogc-max 20000: must be at most 10000"),
    (["--gogc-window", "3s"], "--gogc-window: only with --gogc adaptive"),
    (["--gogc", "adaptve"], '"adaptve"'),
    (["--gogc", "adaptive", "--gogc-interval", "soon"], "gogc-interval"),
])
def test_bad_values_are_refused_by_name(args: list[str], message: str) -> None:
    r = subprocess.run([str(SERVERS["xferd-go"].binary), *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("xferd-go: error: ") and message in r.stderr, r.stderr
