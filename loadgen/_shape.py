"""XferShape, the one LoadTestShape in loadgen/: --xfer-profile picks what it does (see _profiles.py)."""

from __future__ import annotations

from locust import LoadTestShape

from loadgen import _profiles
from loadgen._options import parse_profile, parse_step_s, parse_steps


class XferShape(LoadTestShape):
    """--xfer-profile steady|ramp|step|spike|soak, scaled to -u, -r and -t."""

    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None  # Locust sets it before the first tick
        opts = self.runner.environment.parsed_options
        users = int(getattr(opts, "num_users", None) or 1)
        rate = float(getattr(opts, "spawn_rate", None) or 1)
        run_time = getattr(opts, "run_time", None) or None
        profile = parse_profile(getattr(opts, "xfer_profile", None) or "steady")
        steps = parse_steps(getattr(opts, "xfer_steps", None) or "off")
        step_s = parse_step_s(getattr(opts, "xfer_step_s", None) or "auto")
        if steps and profile == "step":
            users = max(steps)  # the jump to each level happens within about a second, whatever -u says
        target = _profiles.users_at(profile, self.get_run_time(), users, run_time, steps, step_s)
        if target is None:
            return None
        return target, _profiles.spawn_rate_for(profile, users, rate, run_time)
