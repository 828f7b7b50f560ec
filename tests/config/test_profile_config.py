"""`[experiment] profile` and `xferbench run --profile`: parsed, checked, and carried to the experiment."""

from __future__ import annotations

import pytest

from xferbench import cli
from xferbench import config as xe
from xferbench.config import servers

BASE = '[experiment]\nname = "p"\n{extra}\n[load]\ntransport = "frame"\n{load}\n[[servers]]\nserver = "xferd-c"\n'


def parse(extra: str = "", load: str = "") -> xe.Experiment:
    import tomllib

    return xe.parse(tomllib.loads(BASE.format(extra=extra, load=load)), "p.toml")


def test_profile_defaults_off_and_parses_true() -> None:
    assert parse().profile is False
    assert parse("profile = true").profile is True


def test_profile_must_be_a_boolean() -> None:
    with pytest.raises(xe.ExperimentError, match=r"experiment.profile = 'yes': expected true or false"):
        parse('profile = "yes"')


def test_profile_refuses_a_capacity_search() -> None:
    with pytest.raises(xe.ExperimentError, match=r"capacity search .* is not profiled"):
        parse("profile = true", 'mode = "capacity"\nrate = "100"\nslo_p99 = "20ms"')


def test_run_flag_turns_profiling_on() -> None:
    args = cli.build_parser().parse_args(["run", "quick", "--profile"])
    assert args.profile is True
    exp = xe.load_file("quick").with_overrides(profile=args.profile)
    assert exp.profile and not xe.load_file("quick").profile


def test_missing_profilers_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from xferbench.measure import profile

    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(profile.ProfileError, match=r"perf is not installed .*linux-perf"):
        profile.check([servers.SERVERS["xferd-c"]])
    monkeypatch.setenv("PPROF_FOLD_BIN", "/nonexistent/pprof-fold")
    with pytest.raises(profile.ProfileError, match=r"/nonexistent/pprof-fold is missing .*make build"):
        profile.check([servers.SERVERS["xferd-go"]])
