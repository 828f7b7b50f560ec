"""The command line both servers share (PROTOCOL.md "Process interface"): `--help` names every flag with
its XFERD_* variable and default, `--version` says which build this is, sizes and durations take the one
grammars of docs/DESIGN.md. Each test runs the real binary."""

from __future__ import annotations

import re
import subprocess
import urllib.request

import pytest

from py_client.durations import parse_duration
from tests.support.server_help import help_flags
from tests.support.servers import ROOT, SERVERS, running_server, selected_servers

RUN_TIMEOUT_S = 10.0


def run(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SERVERS[name].binary), *args], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env)


def in_git() -> bool:
    try:
        r = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True, timeout=10)
    except FileNotFoundError:
        return False
    return r.returncode == 0


def names_a_commit_here(version: str) -> bool:
    """`git describe --always --dirty` output (`abc1234`, `v1.2`, `v1.2-3-gabc1234`, each maybe `-dirty`)
    that names a commit of this repository."""
    described = version.removesuffix("-dirty")
    m = re.search(r"-g([0-9a-f]{4,})$", described)
    rev = m[1] if m else described
    r = subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True, timeout=10)
    return r.returncode == 0


@pytest.mark.parametrize("name", selected_servers())
def test_help_names_every_flag_with_its_variable_and_default(name: str) -> None:
    r = run(name, "--help")
    assert r.returncode == 0, r.stderr
    flags = help_flags(r.stdout)
    assert {"version", "metrics-addr", "max-frame", "max-chunk", "store", "drain-timeout"} <= set(flags), r.stdout
    for f in flags.values():
        if f.name == "version":
            assert f.env is None, "--version is not a setting: it has no environment variable"
            continue
        assert f.env == "XFERD_" + f.name.upper().replace("-", "_"), f"--{f.name}: {f.env}"
        assert "(default" in f.meaning, f"--{f.name} shows no default: {f.meaning!r}"
    assert "KiB" in r.stdout and "MiB" in r.stdout, "the size grammar is not described"


@pytest.mark.parametrize("name", selected_servers())
def test_every_variable_in_help_is_read(name: str) -> None:
    """Each XFERD_* variable --help names is really read: a malformed value of it is refused, naming it."""
    flags = help_flags(run(name, "--help").stdout)
    for f in flags.values():
        if f.env is None or f.name in ("store", "frame-addr", "metrics-addr", "grpc-addr", "alloc"):
            continue  # a string: any value parses, and the bad ones fail later (binding, the store)
        r = run(name, env={f.env: "not-a-value"})
        assert r.returncode == 2, f"{f.env}=not-a-value: exit {r.returncode}, stderr {r.stderr!r}"
        assert f.env in r.stderr or f.name in r.stderr, f"{f.env}: the error does not name it: {r.stderr!r}"


@pytest.mark.parametrize("name", selected_servers())
def test_version_is_the_build_and_matches_the_metrics(name: str) -> None:
    r = run(name, "--version")
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert words[:1] == [name], r.stdout
    version = words[1]
    if in_git():
        assert names_a_commit_here(version), f"{name} --version {version!r} names no commit of this repository"
    else:
        assert version == "unknown"
    with running_server(name) as s:
        assert s.ready["version"] == version
        with urllib.request.urlopen(s.metrics_url, timeout=RUN_TIMEOUT_S) as resp:
            text = resp.read().decode()
        assert f'server="{name}",version="{version}"' in text


@pytest.mark.parametrize("name", selected_servers())
@pytest.mark.parametrize(("value", "bytes_"), [("1MiB", 1 << 20), ("65536", 65536), ("64KiB", 65536)])
def test_size_flags_take_the_size_grammar(name: str, value: str, bytes_: int) -> None:
    with running_server(name, [f"--max-chunk={value}"], env={"XFERD_MAX_FRAME": "2MiB"}) as s:
        assert s.ready["max_chunk"] == str(bytes_)
        assert s.ready["max_frame"] == str(2 << 20)


@pytest.mark.parametrize("name", selected_servers())
@pytest.mark.parametrize("value", ["64KB", "1.5MiB", "64kib", "1TiB", "64B"])
def test_size_outside_the_grammar_is_refused(name: str, value: str) -> None:
    r = run(name, f"--max-chunk={value}")
    assert r.returncode == 2
    assert f"{name}: error:" in r.stderr and value in r.stderr and "KiB" in r.stderr, r.stderr


@pytest.mark.parametrize("name", selected_servers())
def test_duration_flags_take_the_duration_grammar(name: str) -> None:
    # Several terms, a bare number (seconds) and a fraction, by flag and by variable; each server prints them
    # in its own spelling, which must read back (in the grammar) as the value asked for.
    with running_server(name, ["--read-timeout", "1m30s", "--drain-timeout=10"],
                        env={"XFERD_WRITE_TIMEOUT": "1.5s", "XFERD_UPLOAD_IDLE_TIMEOUT": "1h"}) as s:
        got = {k: parse_duration(s.ready[k]) for k in ("read_timeout", "drain_timeout", "write_timeout",
                                                         "upload_idle_timeout")}
    assert got == {"read_timeout": 90.0, "drain_timeout": 10.0, "write_timeout": 1.5, "upload_idle_timeout": 3600.0}


@pytest.mark.parametrize("name", selected_servers())
@pytest.mark.parametrize("value", ["1s1m", "1m1m", "1m30", "-1s", "1S", "1 s", "1e3s", "1us1ms"])
def test_duration_outside_the_grammar_is_refused(name: str, value: str) -> None:
    r = run(name, f"--read-timeout={value}")
    assert r.returncode == 2, r.stderr
    assert f"{name}: error:" in r.stderr and "read-timeout" in r.stderr and value in r.stderr, r.stderr
    assert "a bare number is seconds" in r.stderr, f"the error does not give the grammar: {r.stderr!r}"
