"""CPU attribution of the server per run (`[experiment] profile = true`, `xferbench run --profile`).

During a run's measured window the server is sampled as its kind's `sampling` says (xferbench/config/servers.py) —
xferd-c by perf (perf.py), xferd-go by its own pprof endpoint (gopprof.py), a command server (server = "command")
by the one its cell chose (xferbench/config/command.py: pprof at its `pprof` address, else perf) — every sample
is put in one bucket by its stack (classify.py, one table of rules), and the run's row gets `cpu_profile` =
{"samples": N, "shares": {bucket: share}}; the folded stacks and a flame graph (flame.py) go to the run folder's
profiles/.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from xferbench.config import servers
from xferbench.measure.profile import flame, gopprof, perf
from xferbench.measure.profile.classify import BUCKETS, Attribution, attribute, format_folded, parse_folded
from xferbench.measure.profile.errors import ProfileError

__all__ = ["BUCKETS", "Attribution", "ProfileError", "Sampler", "attribute", "cell_graph", "check", "finish",
           "merge_cells", "start_server"]

PROFILES_DIR = "profiles"
FINISH_MARGIN_S = 30.0  # past the window: perf's own ending, a busy machine


class Sampler(Protocol):
    def finish(self, timeout_s: float) -> dict[str, int]: ...
    def stop(self) -> None: ...


@dataclass
class Started:
    sampler: Sampler
    stem: str
    seconds: float


def _perf(pid: int, how: servers.Profiler, seconds: float, run_dir: Path, stem: str) -> Sampler:
    return PerfSampler(pid, seconds, run_dir / PROFILES_DIR / f"{stem}.perf.data",
                       run_dir / "logs" / f"{stem}.perf.log", unwind=how.unwind or "dwarf")


def _pprof(pid: int, how: servers.Profiler, seconds: float, run_dir: Path, stem: str) -> Sampler:
    assert how.pprof is not None, "a pprof profiler has its address"
    return gopprof.PprofSampler(how.pprof, seconds, run_dir / PROFILES_DIR / f"{stem}.pprof")


@dataclass(frozen=True)
class Profiler:
    check: Callable[[], object]  # raises ProfileError when this machine cannot sample with it
    # (pid, how the server's kind samples it, its address filled; seconds, run dir, stem)
    sampler: Callable[[int, servers.Profiler, float, Path, str], Sampler]


# The profiler kinds a server's kind names (xferbench/config/servers.py's ServerKind), in the order they are checked.
PROFILERS: dict[str, Profiler] = {"perf": Profiler(perf.check, _perf), "pprof": Profiler(gopprof.check, _pprof)}


def check(kinds: Iterable[servers.ServerKind]) -> None:
    """Before a sweep: can every server of the experiment (the cells' kinds) be profiled here? Raises
    ProfileError."""
    wanted = {kind.profiler_kind for kind in kinds}
    for name, profiler in PROFILERS.items():
        if name in wanted:
            profiler.check()


def start_server(server: servers.ServerKind, pid: int, addr: Callable[[str], str], seconds: float, run_dir: Path,
                 stem: str) -> Started:
    """Starts sampling a running server of a cell's kind for `seconds` from now, by the profiler its kind names;
    `addr` reads an address of its ready line (the runner's Server.addr)."""
    try:
        how = server.sampling(addr)
    except KeyError as e:
        raise ProfileError(f"profile: {e.args[0]}") from None
    if how is None:
        raise ProfileError(f"profile: no profiler for server {server.name!r}")
    (run_dir / PROFILES_DIR).mkdir(exist_ok=True)
    return Started(PROFILERS[how.kind].sampler(pid, how, seconds, run_dir, stem), stem, seconds)


PerfSampler = perf.PerfSampler


def finish(started: Started, run_dir: Path, title: str) -> tuple[dict[str, Any], str | None, list[str]]:
    """Waits for the window's samples; returns the row's cpu_profile, the flame graph's path (relative to
    run_dir, None without samples), and warnings. Raises ProfileError when the samples cannot be had."""
    folded = started.sampler.finish(started.seconds + FINISH_MARGIN_S)
    att = attribute(folded)
    if att.samples == 0:  # still a profiled window (the sampler ran), but with no shares to report
        return att.to_json(), None, ["profile: no CPU samples of the server in the measured window (an idle "
                                     "server, or too few: xferd-go's pprof samples at 100 Hz)"]
    d = run_dir / PROFILES_DIR
    folded_path = d / f"{started.stem}.folded"
    folded_path.write_text(format_folded(folded))
    svg = f"{PROFILES_DIR}/{started.stem}.svg"
    why = flame.render(folded_path, run_dir / svg, title)
    perf_data = d / f"{started.stem}.perf.data"
    perf_data.unlink(missing_ok=True)  # large; the folded stacks keep what the report needs
    return att.to_json(), (f"{PROFILES_DIR}/{started.stem}.folded" if why else svg), [why] if why else []


def cell_graph(cell_slug: str) -> str:
    """Where a cell's flame graph of all its profiled runs goes, relative to the run folder."""
    return f"{PROFILES_DIR}/{cell_slug}.svg"


def merge_cells(run_dir: Path, runs: dict[str, list[str]]) -> list[str]:
    """Per cell (slug → the folded files of its profiled runs), one flame graph of all its samples;
    returns warnings for graphs that could not be drawn."""
    notes = []
    for cell_slug, files in runs.items():
        merged: dict[str, int] = {}
        for rel in files:
            for stack, n in parse_folded((run_dir / rel).read_text()).items():
                merged[stack] = merged.get(stack, 0) + n
        if not merged:
            continue
        folded_path = run_dir / PROFILES_DIR / f"{cell_slug}.folded"
        folded_path.write_text(format_folded(merged))
        why = flame.render(folded_path, run_dir / cell_graph(cell_slug), f"{cell_slug}: all runs")
        if why:
            notes.append(f"{cell_slug}: {why}")
    return notes
