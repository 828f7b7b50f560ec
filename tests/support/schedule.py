"""The order in which pytest-xdist hands test files to its two workers (scripts/test.sh, `--dist loadfile`).

xdist's default puts the files with the most tests first. The slow suite's few long files have one or two tests
of minutes each, so they came last, and one worker ran the 2-minute soak while the other had nothing left to do:
about 40 s of the slow suite's 8 minutes. The slow suite runs with `--no-loadscope-reorder`, and the longest
files go first, longest first, while every other file keeps its place behind them. Their durations were
measured in CI (build/test-results/slow.xml). A file that grows past the last of them belongs in the list."""

from __future__ import annotations

import pytest

LONGEST = (  # seconds of each file's slow tests in CI, December 2026
    "tests/measure/test_soak.py",  # 168
    "tests/run/test_quick_e2e.py",  # 117
    "tests/loadgen/test_ramp.py",  # 95
    "tests/run/test_remote_server.py",  # 84
    "tests/run/containers/test_remote_engine.py",  # 81
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(LONGEST)))
