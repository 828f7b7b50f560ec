"""experiment.json as RunMeta: the file the runner writes loads back unchanged, older and newer files still load,
and a malformed one is refused with the file and the key named."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from xferbench.analysis import runmeta
from xferbench.analysis.runmeta import RunMeta, RunMetaError

# A finished --until-ci run's experiment.json, keys in the order the runner writes them.
WRITTEN: dict[str, Any] = {
    "experiment": "quick",
    "description": "two servers, one load",
    "path": "experiments/quick.toml",
    "repeats": 3,
    "warmup_s": 2.0,
    "baseline": "go/grpc",
    "aa_cell": None,
    "duet": False,
    "alpha": 0.05,
    "soak": None,
    "order_seed": 20240611,
    "pinning": {"mode": "auto", "server": [2, 3], "generator": [0, 1],
                "text": "server on CPUs 2,3, load generator on CPUs 0,1 (auto)"},
    "cells": ["go/grpc", "c/frame"],
    "cell_configs": {
        "go/grpc": {"server": "xferd-go", "transport": "grpc", "load": {"mode": "closed", "users": 8}},
        "c/frame": {"server": "xferd-c", "transport": "frame", "load": {"mode": "closed", "users": 8}},
    },
    "source": "scrape",
    "started_at": "2026-12-01T10:00:00+00:00",
    "machine": {"hostname": "bench", "platform": "Linux-6.8-x86_64", "python": "3.11.7", "cpus": 4,
                "mem_bytes": 8589934592},
    "network": {"latency_ms": 20, "jitter_ms": 0, "bandwidth_bytes_s": None, "text": "20 ms latency"},
    "profile": False,
    "backend": "process",
    "until_ci": {"target": 0.05, "budget_s": 600.0, "widest": 0.031, "rounds": 5,
                 "metric": "client_qps", "met": True, "why": "every ranked interval is within the target"},
    "finished_at": "2026-12-01T10:05:00+00:00",
    "interrupted": False,
    "rounds": 5,
}


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / runmeta.FILE
    path.write_text(json.dumps(data, indent=2))
    return path


def test_a_file_the_runner_wrote_loads_and_writes_back_byte_for_byte(tmp_path: Path) -> None:
    path = _write(tmp_path, WRITTEN)
    meta = runmeta.load(path)
    assert meta.repeats == 3 and meta.rounds == 5 and meta.pinning is not None and meta.pinning.server == [2, 3]
    assert meta.until_ci is not None and meta.until_ci.met and meta.machine is not None and meta.machine.cpus == 4
    assert meta.cell_config("c/frame")["transport"] == "frame" and meta.cell_config("none") == {}
    again = tmp_path / "again.json"
    meta.write(again)
    assert again.read_text() == path.read_text()


def test_a_round_trip_equals_the_original() -> None:
    meta = RunMeta.from_json(copy.deepcopy(WRITTEN))
    assert RunMeta.from_json(meta.to_json()) == meta
    assert meta.to_json() == WRITTEN and list(meta.to_json()) == list(WRITTEN)


def test_keys_known_only_when_the_sweep_ends_are_left_out_until_then() -> None:
    started = {k: v for k, v in WRITTEN.items() if k not in ("until_ci", "finished_at", "interrupted", "rounds")}
    assert RunMeta.from_json(started).to_json() == started


def test_an_older_file_with_few_keys_loads_with_the_defaults_the_reports_used() -> None:
    meta = RunMeta.from_json({"experiment": "synthetic", "cells": ["a", "b"], "baseline": "a", "warmup_s": 1})
    assert meta.warmup_s == 1 and meta.repeats is None and meta.alpha is None and meta.source == "scrape"
    assert meta.soak is None and meta.pinning is None and meta.cell_configs == {} and meta.interrupted is None


def test_keys_of_another_version_are_kept_and_written_back() -> None:
    meta = RunMeta.from_json({**WRITTEN, "gpu": {"model": "none"}})
    assert meta.extra == {"gpu": {"model": "none"}} and meta.to_json()["gpu"] == {"model": "none"}


@pytest.mark.parametrize("key", ["experiment", "cells"])
def test_a_missing_required_key_is_named(tmp_path: Path, key: str) -> None:
    path = _write(tmp_path, {k: v for k, v in WRITTEN.items() if k != key})
    with pytest.raises(RunMetaError, match=rf"{re.escape(str(path))}: missing key '{key}'"):
        runmeta.load(path)


@pytest.mark.parametrize(("key", "value", "named"), [
    ("repeats", "3", "repeats"),
    ("repeats", True, "repeats"),  # a bool is no count, whatever isinstance says
    ("cells", "go/grpc", "cells"),
    ("cells", ["go/grpc", 7], "cells[1]"),
    ("interrupted", "no", "interrupted"),
    ("pinning", {**WRITTEN["pinning"], "server": "2,3"}, "pinning.server"),
    ("until_ci", {"target": 0.05}, "until_ci.budget_s"),
    ("machine", [], "machine"),
])
def test_a_value_of_the_wrong_type_is_named(tmp_path: Path, key: str, value: object, named: str) -> None:
    path = _write(tmp_path, {**WRITTEN, key: value})
    with pytest.raises(RunMetaError, match=rf"{re.escape(str(path))}: (missing )?key '{re.escape(named)}'"):
        runmeta.load(path)


def test_a_file_that_is_not_a_json_object_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / runmeta.FILE
    path.write_text("{not json")
    with pytest.raises(RunMetaError, match=re.escape(str(path))):
        runmeta.load(path)
    path.write_text("[]")
    with pytest.raises(RunMetaError, match=rf"{re.escape(str(path))}: expected a JSON object"):
        runmeta.load(path)


def test_the_report_refuses_a_malformed_file_as_a_bad_run_directory(tmp_path: Path) -> None:
    from xferbench.analysis.summary import RunDirError, read_run

    _write(tmp_path, {**WRITTEN, "repeats": "3"})
    (tmp_path / "runs.jsonl").write_text("")
    with pytest.raises(RunDirError, match=re.escape("experiment.json: key 'repeats'")):
        read_run(tmp_path)
