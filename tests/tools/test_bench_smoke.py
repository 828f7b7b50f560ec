"""`xferbench bench --smoke` against the real built servers and tools: one record appended to a throw-away
history, whole and well-formed. Its speeds are never checked: the machine is shared and they are noise here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from xferbench.tools.bench import lab, tools

ROOT = Path(__file__).resolve().parents[2]
SMOKE_TIMEOUT_S = 180.0
FIGURE_FIELDS = {"name", "unit", "better", "median", "lo", "hi", "rounds", "busy", "note", "values", "aa_spread"}


def test_smoke_appends_one_whole_record(tmp_path: Path) -> None:
    assert not tools.missing(), "bench tools missing: `make build` installs them (this test does not skip)"
    history = tmp_path / "history.jsonl"
    # --force: the smoke run checks the record's shape, which a busy machine does not change (it marks it).
    done = subprocess.run(
        [sys.executable, "-m", "xferbench", "bench", "--smoke", "--force", "--history", str(history)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = history.read_text().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert set(rec) == {"commit", "date", "machine", "load_before", "load_after", "figures", "mode"}
    assert rec["commit"] and rec["commit"] != "unknown"
    assert rec["date"].endswith("+00:00")
    assert rec["mode"] == "smoke"
    assert set(rec["machine"]) == {"hostname", "nproc", "kernel", "cpu"} and rec["machine"]["nproc"] >= 1
    assert rec["load_before"] >= 0 and rec["load_after"] >= 0
    names = [f["name"] for f in rec["figures"]]
    assert len(names) == len(set(names)) and len(names) >= 5, names
    assert any(n.startswith("lab frame upload ") and n.endswith("/ iperf3 (lab path)") for n in names), names
    # The tls case's smoke figure: a frame server's TLS uploads over socat's, named by the suite it negotiated.
    assert any(n.startswith("tls frame upload ") and "/ socat (TLS_" in n for n in names), names
    # The lab case's hosts are gone with the sitting.
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not [line for line in netns.splitlines() if line.startswith(lab.NAME)], netns
    for f in rec["figures"]:
        assert set(f) == FIGURE_FIELDS, f
        for k in ("median", "lo", "hi"):
            assert math.isfinite(f[k]) and f[k] > 0, f
        assert f["lo"] <= f["median"] <= f["hi"], f
        assert f["rounds"] == 1 and isinstance(f["busy"], bool) and f["better"] in ("higher", "lower")
        assert f["values"] == [f["median"]] and f["aa_spread"] == 0.0  # one round: itself, no spread
    # Every figure is in the table, a busy one marked so (the console is 160 columns wide off a terminal).
    rows = [r for r in done.stdout.splitlines() if "│" in r]  # the table's rows, not the progress lines
    for f in rec["figures"]:
        row = next((r for r in rows if f" {f['name']} " in r), None)
        assert row is not None, f["name"]
        assert ("busy" in row) == f["busy"], row


def test_smoke_refuses_the_committed_history() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "xferbench", "bench", "--smoke", "--force"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "history" in done.stdout
