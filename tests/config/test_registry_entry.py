"""A kind of server that is one registry entry (xferbench/config/servers.py) and nothing else: bare-echo, grpc-go's
defaults serving Echo only, with no metrics endpoint. Run by the runner like xferd-go, it gets the client and
/proc figures and no server series; a load its entry says it cannot serve is refused when the file is read.
The run is 1 s of warm-up and 2 s measured."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from tests.support.runs import experiment_file
from xferbench import config as xe
from xferbench.config import servers
from xferbench.run import sweep

HEAD = (
    '[experiment]\nname = "bare"\nrepeats = 1\nduet = false\nwarmup_s = 1\n'
    '[load]\nusers = 2\nspawn_rate = 2\nduration_s = 2\nmix = "echo:1"\nrate = "200"\ntransport = "grpc"\n'
)
BARE = '[[servers]]\nserver = "bare-echo"\n'


def test_bare_echo_runs_to_client_and_proc_figures(tmp_path: Path) -> None:
    exp = experiment_file(tmp_path / "exp.toml", HEAD + BARE)
    (cell,) = exp.cells
    assert cell.name == "bare/grpc" and cell.binary.endswith("build/bin/bare-echo")
    result = sweep.sweep(exp, tmp_path / "run")
    (row,) = result.rows
    assert row.ok, (row.error, row.stderr_tail)
    assert row.server == "bare-echo" and row.ready and row.ready["grpc"].startswith("127.0.0.1:")
    # Every echo answered: an Unimplemented call would be a failure here.
    assert row.client_qps and row.client_qps > 0 and row.client_requests
    assert not row.client_failures, row
    assert row.server_cpu_per_op_s is not None and row.server_cpu_per_op_s > 0
    assert row.rss_peak_bytes and row.rss_peak_bytes > 1 << 20
    assert row.proc_threads_peak and row.proc_fds_peak
    # No metrics endpoint: no server series, and no warning that they are missing.
    assert row.server_requests is None and row.server_qps is None
    assert not [w for w in row.warnings if "server request metrics" in w], row.warnings


def _parse(text: str) -> xe.Experiment:
    return xe.parse(tomllib.loads(text), "t.toml", "t")


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        # The default mix has uploads and downloads.
        ('[[servers]]\nserver = "bare-echo"\n', r"bare-echo does not serve upload, download \(it serves echo\)"),
        (HEAD + BARE + '[servers.load]\nmix = ["echo:1", "meta:1"]\n', r"does not serve meta"),
        (HEAD + BARE + '[servers.load]\ntransport = "frame"\n', r"transport = 'frame': bare-echo serves grpc"),
        (HEAD + BARE + "[soak]\n", r"\[soak\]: bare-echo has no metrics endpoint"),
        (HEAD.replace("warmup_s = 1", "warmup_s = 1\nprofile = true") + BARE, r"bare-echo has no profiler"),
    ],
)
def test_what_bare_echo_cannot_serve_is_refused(text: str, refusal: str) -> None:
    with pytest.raises(xe.ExperimentError, match=refusal):
        _parse(text)


def test_the_refusals_read_the_entry_not_the_name() -> None:
    """The same file is accepted once the entry says the kind serves the call."""
    text = HEAD.replace('"echo:1"', '"echo:1,meta:1"') + BARE
    with pytest.raises(xe.ExperimentError, match="does not serve meta"):
        _parse(text)
    entry = servers.SERVERS["bare-echo"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(servers.SERVERS, "bare-echo", dataclasses.replace(entry, calls=("echo", "meta")))
        assert [c.name for c in _parse(text).cells] == ["bare/grpc"]
