"""The runner's server flags are the servers' own: every limit an experiment may set is accepted by both
real binaries, in the text the runner writes, and comes back in their ready lines."""

from __future__ import annotations

import tomllib

import pytest

from tests.support.servers import selected_servers, start_server
from xferbench import config as xe
from xferbench.config import servers

# One value per limit, in the experiment's grammar, and what the ready line must then say.
LIMITS = {
    "max-chunk": ("1MiB", "1048576"),
    "min-chunk": ("2KiB", "2048"),
    "max-frame": ("2MiB", "2097152"),
    "max-conns": (17, "17"),
    "max-conn-calls": (9, "9"),
    "max-conn-unsent": ("3MiB", "3145728"),
    "max-uploads": (11, "11"),
    "max-uploads-per-conn": (5, "5"),
    "max-staged-bytes": ("1GiB", "1073741824"),
    "read-timeout": ("7s", None),
    "write-timeout": ("3s", None),
    "drain-timeout": ("1500ms", None),
}


def _toml_value(v: object) -> str:
    return f'"{v}"' if isinstance(v, str) else str(v)


def test_every_limit_is_declared() -> None:
    """PROTOCOL.md's limits are a flag of every kind the protocol suites hold to it (bare-echo has no flags)."""
    for spec in servers.SERVERS.values():
        if spec.conformance:
            assert set(LIMITS) <= set(spec.flags), spec.name


@pytest.mark.parametrize("server", selected_servers())
def test_limits_reach_the_real_server(server: str) -> None:
    flags = "\n".join(f"{k} = {_toml_value(v)}" for k, (v, _) in LIMITS.items())
    e = xe.parse(tomllib.loads(f'[[servers]]\nserver = "{server}"\n[servers.flags]\n{flags}\n'), "t.toml", "t")
    argv = e.cells[0].server_argv()
    rs = start_server(server, argv[1 + len(servers.SERVERS[server].port0_flags):])
    try:
        for k, (_, shown) in LIMITS.items():
            if shown is not None:
                assert rs.ready.get(k.replace("-", "_")) == shown, (k, rs.ready)
        # Durations: both servers print them in their own style; the value must still be the one asked for.
        assert rs.ready["drain_timeout"] in {"1.5s", "1500ms"}, rs.ready
    finally:
        rs.stop_cleanly()


@pytest.mark.parametrize("value", ["auto", 0, "lots"])
def test_max_conns_text(value: object) -> None:
    text = f'[[servers]]\nserver = "xferd-c"\n[servers.flags]\nmax-conns = {_toml_value(value)}\n'
    if value == "auto":
        assert "--max-conns=auto" in xe.parse(tomllib.loads(text), "t.toml", "t").cells[0].server_argv()
    else:
        with pytest.raises(xe.ExperimentError, match="max-conns"):
            xe.parse(tomllib.loads(text), "t.toml", "t")
