"""Load profiles of XferShape: users as a function of elapsed time (pure, unit-tested).

All profiles scale to -u USERS, -r SPAWN_RATE and -t RUN_TIME (`use_common_options`):

steady  USERS for the whole run (or until stopped when there is no -t): plain Locust behaviour
ramp    1 -> USERS linearly over the first half of RUN_TIME, then USERS for the second half
step    USERS in 5 equal steps (USERS/5, 2*USERS/5, ...), each RUN_TIME/5 long; or, with --xfer-steps, the
        levels given (50,100,200,...), each held --xfer-step-s (default RUN_TIME / levels), the last one
        until RUN_TIME: the runner cuts one measured window per level out of the run (xferbench/measure/steps.py)
spike   USERS/5 for 40% of RUN_TIME, USERS for the next 20%, USERS/5 for the last 40%
soak    1 -> USERS over 10% of RUN_TIME (at most 60 s), then USERS until RUN_TIME (or until stopped)

tick() returns None once RUN_TIME has passed, which ends the test.
"""

from __future__ import annotations

import math

NEEDS_RUN_TIME = ("ramp", "step", "spike")


def users_at(profile: str, t: float, users: int, run_time: float | None, steps: tuple[int, ...] = (),
             step_s: float | None = None) -> int | None:
    """Target user count at elapsed time t, or None when the profile is over. `steps` (explicit levels) and
    `step_s` (seconds each is held) apply to the step profile only."""
    if run_time is not None and t >= run_time:
        return None
    if profile == "step" and steps:
        return stepped(t, steps, step_s, run_time)
    if profile == "steady":
        return users
    if profile == "soak":
        if run_time is None:
            ramp = 60.0
        else:
            ramp = min(60.0, 0.1 * run_time)
        return _linear(t, ramp, users)
    if run_time is None:
        raise ValueError(f"--xfer-profile {profile} needs -t/--run-time")
    if profile == "ramp":
        return _linear(t, run_time / 2, users)
    if profile == "step":
        k = min(5, int(t / (run_time / 5)) + 1)
        return max(1, math.ceil(users * k / 5))
    if profile == "spike":
        base = max(1, users // 5)
        return users if 0.4 * run_time <= t < 0.6 * run_time else base
    raise ValueError(f"unknown profile {profile!r}")


def stepped(t: float, steps: tuple[int, ...], step_s: float | None, run_time: float | None) -> int:
    """The level of explicit steps at t: each held step_s (or run_time / levels), the last one to the end."""
    if step_s is None:
        if run_time is None:
            raise ValueError("--xfer-steps without --xfer-step-s needs -t/--run-time")
        step_s = run_time / len(steps)
    return steps[min(len(steps) - 1, int(t / step_s))]


def _linear(t: float, span: float, users: int) -> int:
    if span <= 0 or t >= span:
        return users
    return max(1, min(users, 1 + int((users - 1) * t / span)))


def spawn_rate_for(profile: str, users: int, spawn_rate: float, run_time: float | None) -> float:
    """A spawn rate at least as fast as the profile's own slope, so the shape is followed (with explicit steps,
    `users` is their highest level)."""
    if profile in ("ramp", "soak") and run_time:
        span = run_time / 2 if profile == "ramp" else min(60.0, 0.1 * run_time)
        return max(spawn_rate, users / max(span, 1.0))
    if profile in ("step", "spike"):
        return max(spawn_rate, float(users))  # jumps happen within about a second
    return spawn_rate
