"""Capacity at an SLO: the highest offered rate a server sustains with client P99 and failures within
targets, found by stepping and bisecting an open-loop rate (what wrk2, fortio and k6 users do by hand).

The search doubles the rate from the first step until a step misses the SLO, halves it while the first
step already misses, then bisects geometrically between the best passing and the lowest failing rate
until they are within `precision` of each other. A step passes when client P99 <= the SLO, the failed
fraction <= its target, and the server was offered what was asked (the achieved rate within 5%; a
server that falls behind an open loop shows it there before the P99 catches up).

It stops, and says so, when the load generator saturates before the server: a step above the
saturation line tells nothing about the server, so the capacity is then only a lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from xferbench.analysis.metrics import CAPACITY_PRECISION, GEN_IDLE_MIN_CORES
from xferbench.analysis.row import Figures

ACHIEVED_MIN = 0.95  # a step whose achieved rate is below 95% of the offered one did not keep up
PRECISION = CAPACITY_PRECISION
MIN_RATE_FRACTION = 1 / 16  # how far below the first step the search goes before giving up

FOUND = "found"
GENERATOR_BOUND = "generator-bound"
NONE_PASSED = "no rate met the SLO"
MAX_STEPS = "step limit reached"


@dataclass
class Step:
    rate: float
    achieved_qps: float | None
    p99_s: float | None
    failure_rate: float | None
    gen_cpu_cores: float | None
    gen_idle_cores: float | None = None  # idle time left on the generator's CPUs (cores)
    ok: bool = False
    why: str = ""
    figures: Figures = field(default_factory=lambda: Figures(), repr=False)  # the load phase's, for the row

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("figures")
        return d


@dataclass
class Result:
    capacity_rps: float | None
    status: str
    steps: list[Step]

    @property
    def best(self) -> Step | None:
        passing = [s for s in self.steps if s.ok]
        return max(passing, key=lambda s: s.rate) if passing else None


def judge(step: Step, slo_p99_s: float, slo_failures: float) -> Step:
    reasons = []
    if step.p99_s is None or step.p99_s > slo_p99_s:
        reasons.append(f"P99 {_ms(step.p99_s)} > {_ms(slo_p99_s)}")
    if step.failure_rate is None or step.failure_rate > slo_failures:
        reasons.append(f"failures {_pct(step.failure_rate)} > {_pct(slo_failures)}")
    if step.achieved_qps is None or step.achieved_qps < ACHIEVED_MIN * step.rate:
        reasons.append(f"achieved {_num(step.achieved_qps)} of {step.rate:.0f} req/s")
    step.ok = not reasons
    step.why = "; ".join(reasons) if reasons else "within the SLO"
    return step


def search(
    measure: Callable[[float], Step],
    start_rate: float,
    slo_p99_s: float,
    slo_failures: float,
    gen_saturated_cores: float,
    gen_idle_min_cores: float = GEN_IDLE_MIN_CORES,
    precision: float = PRECISION,
    max_steps: int = 10,
) -> Result:
    """Steps `measure(rate)` until the capacity is bracketed within `precision` (or a stop condition)."""
    steps: list[Step] = []
    good: float | None = None
    bad: float | None = None
    rate = start_rate
    while len(steps) < max_steps:
        step = judge(measure(rate), slo_p99_s, slo_failures)
        steps.append(step)
        busy = step.gen_cpu_cores is not None and step.gen_cpu_cores > gen_saturated_cores
        no_idle = step.gen_idle_cores is not None and step.gen_idle_cores < gen_idle_min_cores
        if busy or no_idle:
            step.why += f"; load generator saturated ({_num(step.gen_cpu_cores)} cores"
            step.why += f", its CPUs {step.gen_idle_cores:.2f} idle)" if step.gen_idle_cores is not None else ")"
            if step.ok:
                good = rate
            return Result(good, GENERATOR_BOUND, steps)
        if step.ok:
            good = rate
        else:
            bad = rate
        if bad is None:
            rate *= 2
        elif good is None:
            rate /= 2
            if rate < start_rate * MIN_RATE_FRACTION:
                return Result(None, NONE_PASSED, steps)
        elif bad / good - 1 <= precision:
            return Result(good, FOUND, steps)
        else:
            rate = math.sqrt(good * bad)
    return Result(good, MAX_STEPS if good is not None else NONE_PASSED, steps)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.1f} ms"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.2f}%"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"
