"""The server registry (xferbench/config/servers.py): every entry is complete and agrees with the modules that read
it, and a kind of server added to the registry alone is accepted by an experiment and started the same way."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from xferbench import config as xe
from xferbench.config import servers
from xferbench.measure import profile
from xferbench.run import process
from xferbench.run.containers import backend, images
from xferbench.tools import stack

ROOT = Path(__file__).resolve().parents[2]
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


@pytest.mark.parametrize("name", list(servers.SERVERS))
def test_entry_is_complete(name: str) -> None:
    s = servers.SERVERS[name]
    assert s.name == name and s.label and s.ready_word
    assert ENV_NAME.match(s.binary_env), s.binary_env
    assert s.binary.startswith("build/bin/"), s.binary
    assert s.transports and set(s.transports) <= set(xe.TRANSPORTS)
    # Every transport and the metrics endpoint (when it has one) is a listener with a port and a port-0 flag.
    for listener in (*s.transports, *([s.metrics_key] if s.metrics else [])):
        assert listener in s.ports, (listener, s.ports)
        assert f"--{listener}-addr=127.0.0.1:0" in s.port0_flags
    assert len(s.port0_flags) == len(s.ports)
    assert all(0 < p < 65536 for p in s.ports.values())
    assert s.calls and set(s.calls) <= set(servers.CALLS), s.calls
    # What the protocol suites hold a kind to: every call, PROTOCOL.md's limits, and its own series.
    if s.conformance:
        assert s.calls == servers.CALLS and set(servers.LIMIT_FLAGS) <= set(s.flags) and s.metrics
    assert all(callable(v) for v in s.flags.values())
    assert s.profiler is None or s.profiler in profile.PROFILERS
    if s.image is not None:
        spec = images.SPECS[s.image.name]
        assert (ROOT / spec.dockerfile).is_file(), spec.dockerfile
        assert spec.context == (s.binary,) and spec.sources == s.image.sources
        assert all((ROOT / src).exists() for src in s.image.sources), s.image.sources


def test_default_ports_are_distinct() -> None:
    """The local stack scrapes every server with metrics on its default metrics port at once: no two may share
    one; a kind without a metrics endpoint is no target of it."""
    ports = [p for s in servers.SERVERS.values() for p in s.ports.values()]
    assert len(ports) == len(set(ports)), ports
    for s in servers.SERVERS.values():
        if s.metrics:
            assert stack.LOCAL_SERVICES[s.name] == [f"127.0.0.1:{s.ports[s.metrics_key]}"]
        else:
            assert s.name not in stack.LOCAL_SERVICES


# Run in a fresh interpreter: the modules build their tables from SERVERS when first imported.
CAPABILITIES = """
import dataclasses, json, sys
from xferbench.config import servers
entry = dataclasses.replace(servers.SERVERS["xferd-go"], name="xferd-bare", ports={"grpc": 50099}, image=None,
                            metrics=False, conformance=False, calls=("echo",))
servers.SERVERS[entry.name] = entry
from tests.support import servers as support
from xferbench.tools import stack
from xferbench.run.containers import images
json.dump({"stack": sorted(stack.LOCAL_SERVICES), "images": sorted(images.SPECS),
           "suites": sorted(support.SERVERS)}, sys.stdout)
"""


def test_capabilities_reach_what_iterates_the_registry() -> None:
    """An entry without metrics, image or conformance, added to the registry alone: the stack's targets, the
    images and the suites' servers each leave it out, from its fields."""
    out = subprocess.run([sys.executable, "-c", CAPABILITIES], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert "xferd-go" in got["stack"] and "xferd-bare" not in got["stack"]
    assert "xferd-go" in got["images"] and "xferd-bare" not in got["images"]
    assert "xferd-go" in got["suites"] and "xferd-bare" not in got["suites"]


def test_the_runner_reads_metrics_from_the_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """One place says whether a cell's server is scraped: the entry of a registry kind."""
    entry = dataclasses.replace(servers.SERVERS["xferd-go"], name="xferd-bare", label="bare", metrics=False, calls=("echo",))
    monkeypatch.setitem(servers.SERVERS, entry.name, entry)
    text = f'[load]\nmix = "echo:1"\n[[servers]]\nserver = "{entry.name}"\n[[servers]]\nserver = "xferd-go"\n'
    bare, go = xe.parse(tomllib.loads(text), "t.toml", "t").cells
    assert not bare.kind.metrics and go.kind.metrics and bare.kind is entry


def test_what_the_runner_reads_is_unchanged() -> None:
    """The values the runner used before the registry held them."""
    go, c = servers.SERVERS["xferd-go"], servers.SERVERS["xferd-c"]
    assert go.port0_flags == ("--grpc-addr=127.0.0.1:0", "--frame-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0")
    assert c.port0_flags == ("--frame-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0")
    assert dict(go.ports) == {"grpc": 50051, "frame": 7070, "metrics": 9101}
    assert dict(c.ports) == {"frame": 7071, "metrics": 9102}
    assert (go.profiler, c.profiler) == ("pprof", "perf")
    assert backend.default_image(go) == "localhost/xferbench/xferd-go:dev"


@pytest.fixture
def c2(monkeypatch: pytest.MonkeyPatch) -> servers.ServerSpec:
    """A kind known only to the registry: xferd-c's entry under another name, running the same binary."""
    entry = dataclasses.replace(servers.SERVERS["xferd-c"], name="xferd-c2", label="c2")
    monkeypatch.setitem(servers.SERVERS, entry.name, entry)
    monkeypatch.delenv(entry.binary_env, raising=False)
    return entry


def test_registry_only_kind_validates_in_an_experiment(c2: servers.ServerSpec) -> None:
    text = '[[servers]]\nserver = "xferd-c2"\n[servers.flags]\nalloc = ["glibc", "jemalloc"]\nmax-conns = 64\n'
    e = xe.parse(tomllib.loads(text), "t.toml", "t")
    assert [c.name for c in e.cells] == ["c2/frame/alloc=glibc", "c2/frame/alloc=jemalloc"]
    cell = e.cells[0]
    assert cell.server == "xferd-c2" and cell.binary == str(ROOT / "build/bin/xferd-c")
    assert cell.server_argv() == [cell.binary, *c2.port0_flags, "--alloc=glibc", "--max-conns=64"]
    # The container backend and the profiler read the same entry.
    assert backend.image_for(cell) == "localhost/xferbench/xferd-c:dev"
    assert backend.container_argv(cell)[:2] == ["--frame-addr=0.0.0.0:7071", "--metrics-addr=0.0.0.0:9102"]


def test_registry_only_kind_is_checked_like_the_others(c2: servers.ServerSpec) -> None:
    with pytest.raises(xe.ExperimentError, match=r"flags\.pool: unknown flag of xferd-c2"):
        xe.parse(tomllib.loads('[[servers]]\nserver = "xferd-c2"\n[servers.flags]\npool = "on"\n'), "t.toml", "t")
    with pytest.raises(xe.ExperimentError, match=r"xferd-c2 serves frame"):
        xe.parse(tomllib.loads('[[servers]]\nserver = "xferd-c2"\n[servers.load]\ntransport = "grpc"\n'), "t.toml", "t")
    with pytest.raises(xe.ExperimentError, match=r"xferd-go \| xferd-c \|.* xferd-c2 \| command"):
        xe.parse(tomllib.loads('[[servers]]\nserver = "xferd-x"\n'), "t.toml", "t")


def test_a_kind_without_a_profiler_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = dataclasses.replace(servers.SERVERS["xferd-c"], name="xferd-np", profiler=None)
    monkeypatch.setitem(servers.SERVERS, entry.name, entry)
    with pytest.raises(profile.ProfileError, match="no profiler for server 'xferd-np'"):
        profile.start_server(entry, 1, lambda key: "127.0.0.1:1", 1.0, tmp_path, "stem")


def test_registry_only_kind_becomes_ready(c2: servers.ServerSpec) -> None:
    """The runner's Server waits for the entry's ready word, not the kind's name: the copy runs xferd-c."""
    binary = c2.default_binary()
    assert Path(binary).exists(), f"{binary} is not built: run `make build`"
    s = process.Server(c2.name, [binary, *c2.port0_flags], {}, ready_word=c2.ready_word)
    try:
        assert s.ready_line.startswith("xferd-c ready ") and s.addr(c2.metrics_key).startswith("127.0.0.1:")
    finally:
        assert s.stop() == 0
