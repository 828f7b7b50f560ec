"""The profiler of a command server (`server = "command"`, xferbench/config/command.py): chosen once per cell from
the program itself and its `pprof` key, recorded in the cell's config, checked before a sweep like ours. The
programs inspected are real: build/bin's Go and C servers, Debian's memcached, a shell script."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from xferbench import config as xe
from xferbench.config import command, servers
from xferbench.measure import profile

ROOT = Path(__file__).resolve().parents[2]
HEAD = '[experiment]\nname = "p"\nprofile = true\n[load]\ntransport = "grpc"\n'


def _cell(entry: str) -> xe.Cell:
    exp = xe.parse(tomllib.loads(HEAD + '[[servers]]\nserver = "command"\n' + entry), "p.toml")
    assert exp.profile and len(exp.cells) == 1
    return exp.cells[0]


def _command(entry: str) -> tuple[xe.Cell, command.Command]:
    cell = _cell(entry)
    assert isinstance(cell.kind, command.Command)
    return cell, cell.kind


def _profiler(entry: str) -> servers.Profiler:
    return _command(entry)[1].profiler


def test_a_go_program_with_a_pprof_address_is_sampled_there() -> None:
    how = _profiler(
        'command = ["build/bin/xferd-go", "--grpc-addr", "127.0.0.1:{port}", "--metrics-addr", "127.0.0.1:{m_port}"]\n'
        'pprof = "http://127.0.0.1:{m_port}/debug/pprof/"\n'
    )
    assert (how.kind, how.unwind, how.pprof) == ("pprof", None, "http://127.0.0.1:{m_port}/debug/pprof")


def test_a_go_program_without_one_gets_perf_by_frame_pointers() -> None:
    cell, cmd = _command('command = ["build/bin/xferd-go", "--grpc-addr", "127.0.0.1:{port}"]\n')
    assert (cmd.profiler.kind, cmd.profiler.unwind) == ("perf", "fp")
    # Recorded with the cell: experiment.json and every row's config say which profiler sampled it, and why.
    recorded = cell.config()["command"]["profiler"]
    assert recorded["kind"] == "perf" and recorded["unwind"] == "fp" and "Go program" in recorded["why"]


@pytest.mark.parametrize("program", ["build/bin/xferd-c", shutil.which("memcached") or "/usr/bin/memcached"])
def test_a_native_program_gets_perf_by_dwarf(program: str) -> None:
    assert Path(program).exists(), f"{program} is missing (make build; apt-get install memcached)"
    how = _profiler(f'command = ["{program}", "-p", "{{port}}"]\n')
    assert (how.kind, how.unwind) == ("perf", "dwarf") and "native" in how.why


def test_a_script_gets_perf_on_its_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\nexec sleep 60\n")
    script.chmod(0o755)
    how = _profiler(f'command = ["{script}", "{{port}}"]\n')
    assert (how.kind, how.unwind) == ("perf", "dwarf") and "interpreter" in how.why


@pytest.mark.parametrize("value", ["127.0.0.1:6060/debug/pprof", "https://x/debug/pprof", 6060, ""])
def test_a_pprof_that_is_not_an_http_address_is_refused(value: object) -> None:
    text = f'"{value}"' if isinstance(value, str) else str(value)
    with pytest.raises(xe.ExperimentError, match=r"servers\[0\]\.pprof = .*expected the http:// address"):
        _cell(f'command = ["build/bin/xferd-go", "--grpc-addr", "127.0.0.1:{{port}}"]\npprof = {text}\n')


def test_a_pprof_placeholder_gets_its_own_port() -> None:
    _, cmd = _command('command = ["build/bin/xferd-go", "--grpc-addr", "127.0.0.1:{port}"]\n'
                      'pprof = "http://127.0.0.1:{debug_port}/debug/pprof"\n')
    assert cmd.ports == ("port", "debug_port")


def test_the_sweep_check_applies_each_command_cells_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    perf_cell = _cell('command = ["build/bin/xferd-c", "-p", "{port}"]\n')
    pprof_cell = _cell('command = ["build/bin/xferd-go", "--metrics-addr", "127.0.0.1:{port}"]\n'
                       'pprof = "http://127.0.0.1:{port}/debug/pprof"\n')
    monkeypatch.setenv("PATH", "/nonexistent")  # no perf
    with pytest.raises(profile.ProfileError, match=r"perf is not installed"):
        profile.check([perf_cell.kind])
    profile.check([pprof_cell.kind])  # pprof-fold is built: nothing missing for it
    monkeypatch.setenv("PPROF_FOLD_BIN", "/nonexistent/pprof-fold")
    with pytest.raises(profile.ProfileError, match=r"/nonexistent/pprof-fold is missing"):
        profile.check([pprof_cell.kind])


def test_a_too_paranoid_kernel_is_named_for_a_command_cell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from xferbench.measure.profile import perf

    paranoid = tmp_path / "perf_event_paranoid"
    paranoid.write_text("3\n")
    monkeypatch.setattr(perf, "PARANOID", paranoid)
    monkeypatch.setattr(perf.os, "geteuid", lambda: 1000)
    with pytest.raises(profile.ProfileError, match=r"perf_event_paranoid is 3: perf may not sample"):
        profile.check([_cell('command = ["build/bin/xferd-c", "-p", "{port}"]\n').kind])
