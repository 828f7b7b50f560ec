"""How the loadgen suites spend less time on Locust processes: runs two at a time, and refusals in-process.

A real `locust -f loadgen/` takes two to three seconds around its run whatever the run's length (imports
before its first user, shutdown after its last), much of it waiting rather than computing. The suites' runs
therefore go through `Runs`: a module's first `runs` fixture (each module defines one with `runs_for`)
submits, in test order, the run of every selected test of that module marked `@in_background`, and PARALLEL
threads carry them out, so the next runs are under way while a test checks its own. Per module, not per
session: under pytest-xdist (scripts/test.sh, `--dist loadfile`) a worker runs whole modules, but which ones
is decided as it goes, so a worker that submitted every module's runs would carry out the other worker's too. Each run
stands alone: its own server, its own dump folder, nothing shared with another run. A test reads its run
with `runs[request.node]`; whatever the run raised (a server that did not start, a Locust past its timeout,
a server that did not stop cleanly) is raised there, in that test.

Refusals that need no run are checked in-process instead (tests/loadgen/inprocess.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

PARALLEL = 2  # Locust runs at once: `make test` must fit two cores

Plan = Callable[..., Any]  # (tmp folder, **the test's parameters) -> the run's result


def in_background(plan: Plan, shared: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Marks a test whose run `plan(tmp, **its parameters)` the module's `runs` fixture carries out. Tests
    marked with the same `shared` name read one run, carried out once (`plan(tmp)`)."""
    def mark(test: Callable[..., Any]) -> Callable[..., Any]:
        test.locust_plan = plan  # type: ignore[attr-defined]
        test.locust_shared = shared  # type: ignore[attr-defined]
        return test
    return mark


class Runs:
    """The runs of a module's selected tests, carried out PARALLEL at a time in the order submitted."""

    def __init__(self, jobs: dict[str, Callable[[], Any]], key_of: dict[str, str], workers: int = PARALLEL) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="locust-run")
        self._runs: dict[str, Future[Any]] = {key: self._pool.submit(job) for key, job in jobs.items()}
        self._key_of = key_of  # test node id -> its run

    def __getitem__(self, item: pytest.Item) -> Any:
        return self._runs[self._key_of[item.nodeid]].result()

    def close(self) -> None:
        for run in self._runs.values():
            run.cancel()  # a run no test reads any more (after -x, say) does not start
        self._pool.shutdown(wait=True)  # those under way end within their own timeouts


_MODULE_RUNS = pytest.StashKey[dict[str, Runs]]()


def runs_for(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The body of each module's `runs` fixture: the module's runs, submitted on the first call (those of its
    selected tests that use a fixture of the same name), closed when the session ends."""
    session = request.session
    module = request.module.__name__
    by_module = session.stash.setdefault(_MODULE_RUNS, {})
    if module in by_module:
        return by_module[module]
    jobs: dict[str, Callable[[], Any]] = {}  # in test order (dicts keep it)
    key_of: dict[str, str] = {}
    for item in session.items:
        test = getattr(item, "function", None)
        plan = getattr(test, "locust_plan", None)
        if (plan is None or item.module.__name__ != module  # type: ignore[attr-defined]
                or request.fixturename not in getattr(item, "fixturenames", ())):
            continue
        shared = getattr(test, "locust_shared", None)
        key = key_of[item.nodeid] = f"{item.module.__name__}::{shared}" if shared else item.nodeid  # type: ignore[attr-defined]
        if key not in jobs:
            params = {} if shared or not hasattr(item, "callspec") else item.callspec.params
            tmp = tmp_path_factory.mktemp(re.sub(r"[^\w.-]", "_", shared or item.name)[:60], numbered=True)
            jobs[key] = functools.partial(plan, tmp, **params)
    runs = by_module[module] = Runs(jobs, key_of)
    request.config.add_cleanup(runs.close)
    return runs
