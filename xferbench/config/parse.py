"""An experiment file, or its decoded TOML document, to an Experiment: every table read and checked, then
the checks that span tables (the baseline, the backend, duets, A/A)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from xferbench.config import hosts as hosts_table
from xferbench.config import userload
from xferbench.config.baselines import Baselines, parse_baselines
from xferbench.config.cells import _group_cells
from xferbench.config.cpus import _pinning
from xferbench.config.files import resolve
from xferbench.config.load import _check_load_value
from xferbench.config.model import (
    AA_SUFFIX,
    BACKENDS,
    DEFAULT_REPEATS,
    Cell,
    Experiment,
    ExperimentError,
    Limits,
    Load,
    Pinning,
)
from xferbench.config.tables import _network, _soak
from xferbench.config.values import _seconds_key, _table, _unknown

_TOP_KEYS = ("experiment", "load", "pinning", "servers", "network", "soak", "hosts")
_EXPERIMENT_KEYS = ("name", "description", "repeats", "warmup_s", "baseline", "aa", "alpha", "duet", "profile", "backend")


def load_file(path: str | Path) -> Experiment:
    p = resolve(path)
    try:
        with open(p, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ExperimentError(f"{p}: not valid TOML: {e}") from None
    except OSError as e:
        raise ExperimentError(f"{p}: {e.strerror}") from None
    exp = parse(data, str(p), default_name=p.stem, base_dir=p.resolve().parent)
    return replace(exp, path=p)


def parse(
    data: dict[str, Any], source: str = "<experiment>", default_name: str = "experiment", base_dir: Path | None = None
) -> Experiment:
    """Validates a decoded TOML document; raises ExperimentError naming `source` and the field. Paths in
    [load] and a command server's entry are relative to `base_dir`, the experiment file's folder (default: the
    working directory)."""
    folder = base_dir or Path.cwd()
    try:
        return _parse(userload.absolute_document(data, folder), default_name, folder)
    except ExperimentError as e:
        raise ExperimentError(f"{source}: {e}") from None


@dataclass(frozen=True)
class _Meta:
    """The [experiment] table, checked."""

    name: str
    description: str
    backend: str
    repeats: int
    warmup_s: float
    aa: bool = False
    alpha: float = 0.05
    profile: bool = False
    duet: bool | None = None  # None: the default _duet chooses


def _parse(data: dict[str, Any], default_name: str, folder: Path) -> Experiment:
    # The tables are read in this order, so that a file with several faults always names the same first.
    _unknown(data, _TOP_KEYS, "(top level)")
    meta_tab = _table(data.get("experiment", {}), "experiment")
    meta = _experiment_table(meta_tab, default_name)
    base = replace(Load(), **{k: _check_load_value(k, v, "load") for k, v in _table(data.get("load", {}), "load").items()})
    meta = _switches(meta_tab, meta)
    pinning = _pinning(_table(data.get("pinning", {}), "pinning"))
    network = _network(_table(data["network"], "network")) if "network" in data else None
    hosts = hosts_table.parse_hosts(_table(data.get("hosts", {}), "hosts"), folder)
    tables, aliases = _cells(data.get("servers"), base, folder)
    cells = [c for t in tables for c in t]
    hosts_table.check_cells(hosts, base, cells, network=network is not None, backend=meta.backend,
                            profile=meta.profile, soak="soak" in data)
    baselines = parse_baselines(meta_tab.get("baseline"), tables, aliases)
    baseline = baselines.first
    soak = _soak(_table(data["soak"], "soak")) if "soak" in data else None
    _check_combinations(meta, cells, soak_table="soak" in data)
    duet = meta.duet
    if soak is not None and duet is None:
        duet = False  # a soak judges each run alone: a partner would only add load to the shared CPUs
    duet = _duet(duet, cells, meta.aa, pinning, baselines)
    of = baselines.of
    if meta.aa:
        i = next(i for i, c in enumerate(cells) if c.name == baseline)
        cells.insert(i + 1, replace(cells[i], name=baseline + AA_SUFFIX))
        of = {**of, baseline + AA_SUFFIX: baseline} if of else of
    return Experiment(
        meta.name,
        meta.description,
        None,
        meta.repeats,
        meta.warmup_s,
        baseline,
        pinning,
        tuple(cells),
        meta.aa,
        meta.alpha,
        duet,
        network,
        soak=soak,
        profile=meta.profile,
        backend=meta.backend,
        hosts=hosts,
        baselines=of,
    )


def _experiment_table(meta: dict[str, Any], default_name: str) -> _Meta:
    """[experiment]'s keys, its name, backend, repeats and warm-up."""
    _unknown(meta, _EXPERIMENT_KEYS, "experiment")
    backend = meta.get("backend", "process")
    if backend not in BACKENDS:
        raise ExperimentError(f"experiment.backend = {backend!r}: expected {' | '.join(BACKENDS)}")
    name = meta.get("name", default_name)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise ExperimentError(f"experiment.name = {name!r}: expected letters, digits, '.', '_' or '-'")
    repeats = meta.get("repeats", DEFAULT_REPEATS)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ExperimentError(f"experiment.repeats = {repeats!r}: expected an integer >= 1")
    warmup_value = meta.get("warmup_s", 2)
    warmup = _seconds_key(warmup_value, positive=False)
    if warmup is None:
        raise ExperimentError(
            f'experiment.warmup_s = {warmup_value!r}: expected a number of seconds >= 0, or a duration such as "30s"'
        )
    return _Meta(name, str(meta.get("description", "")), backend, repeats, float(warmup))


def _switches(meta: dict[str, Any], checked: _Meta) -> _Meta:
    """[experiment]'s aa, alpha, profile and duet."""
    aa = meta.get("aa", False)
    if not isinstance(aa, bool):
        raise ExperimentError(f"experiment.aa = {aa!r}: expected true or false")
    alpha = meta.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 0.5:
        raise ExperimentError(f"experiment.alpha = {alpha!r}: expected a number between 0 and 0.5 (0.05 = 5%)")
    profile = meta.get("profile", False)
    if not isinstance(profile, bool):
        raise ExperimentError(f"experiment.profile = {profile!r}: expected true or false")
    duet = meta.get("duet")
    if duet is not None and not isinstance(duet, bool):
        raise ExperimentError(f"experiment.duet = {duet!r}: expected true or false")
    return replace(checked, aa=aa, alpha=float(alpha), profile=profile, duet=duet)


def _cells(groups: Any, base: Load, folder: Path) -> tuple[list[list[Cell]], dict[str, str]]:
    """Every [[servers]] group's cells, their names unique across groups, and the names their checked values
    would spell → the cell's name, where that is one cell's (xferbench/config/cells.py)."""
    if not isinstance(groups, list) or not groups:
        raise ExperimentError("servers: required; expected one or more [[servers]] tables")
    tables: list[list[Cell]] = []
    spelled: dict[str, list[str]] = {}
    for gi, group in enumerate(groups):
        group_cells, aliases = _group_cells(_table(group, f"servers[{gi}]"), f"servers[{gi}]", base, folder)
        tables.append(group_cells)
        for alias, name in aliases:
            spelled.setdefault(alias, []).append(name)
    seen: set[str] = set()
    for c in (c for t in tables for c in t):
        if c.name in seen:
            raise ExperimentError(
                f"servers: two cells are both named {c.name!r}; give the groups different labels or name templates"
            )
        seen.add(c.name)
    return tables, {alias: names[0] for alias, names in spelled.items() if len(names) == 1}


def _check_combinations(meta: _Meta, cells: list[Cell], soak_table: bool) -> None:
    """What the backend, [soak] and profiling refuse of the cells, as each cell's kind answers."""
    limited = [c.name for c in cells if c.limits != Limits()]
    if limited and meta.backend != "docker":
        raise ExperimentError(
            f"servers.limits (cell {limited[0]!r}): container limits need experiment.backend = "
            '"docker"; a host process gets no cgroup limits here'
        )
    for c in cells if soak_table else ():  # a soak judges the server's own counts, as ours export them
        if not c.kind.metrics:
            raise ExperimentError(f"[soak]: {c.server} has no metrics endpoint, and a soak judges the server's own counts")
        if not c.kind.soak:
            raise ExperimentError(f"servers (cell {c.name!r}): a {c.server} server runs without [soak] for now; drop [soak]")
    for c in cells:  # the user's image: in a container exactly when it names it, and xferbench never builds it
        if c.kind.needs_image and meta.backend == "docker" and not c.image:
            raise ExperimentError(
                f'servers (cell {c.name!r}): a {c.server} server in a container (experiment.backend = "docker") '
                'needs image = "<its image>", present in the engine (xferbench does not build it)'
            )
        if c.kind.needs_image and meta.backend != "docker" and c.image:
            raise ExperimentError(
                f'servers (cell {c.name!r}): image = {c.image!r} needs experiment.backend = "docker" '
                "(without it the command runs as a host process)"
            )
    for c in cells:  # the run's certificate is a file of this machine, given to a process of this machine
        if c.load.tls != "off" and (meta.backend == "docker" or c.host is not None):
            where = 'experiment.backend = "docker"' if meta.backend == "docker" else f"[[servers]] host = {c.host!r}"
            raise ExperimentError(
                f"servers (cell {c.name!r}): load.tls = {c.load.tls!r} with {where}: the run's TLS certificate is "
                "made on this machine and given to servers here only; drop one of them"
            )
    for c in cells if meta.profile else ():
        if c.kind.profiler_kind is None:
            raise ExperimentError(f"experiment.profile = true: {c.server} has no profiler in the registry; drop one of them")
    if meta.profile and any(c.load.mode == "capacity" for c in cells):
        raise ExperimentError(
            'experiment.profile = true: a capacity search (load.mode = "capacity") is not '
            "profiled (its steps have no one measured window); drop one of them"
        )


def _duet(asked: bool | None, cells: list[Cell], aa: bool, pinning: Pinning, baselines: Baselines) -> bool:
    """Duets measure ratios far more steadily (BENCHMARKS.md: half the A/A interval here), but only
    make sense for a fixed offered load: in a closed loop the two servers would race for the CPU, and a
    capacity search moves each cell's rate on its own. A baseline per table runs only beside its table's cells,
    so a table of its baseline alone would never run."""
    modes = {c.load.mode for c in cells}
    pair = len(cells) >= 2 or aa
    mates = list(baselines.of.values())
    alone = [b for b in dict.fromkeys(mates) if mates.count(b) == 1 and not (aa and b == baselines.first)]
    if asked is None:
        return pair and not alone and all(c.load.offered for c in cells) and pinning.mode != "none"
    if asked and not pair:
        raise ExperimentError("experiment.duet = true: needs a second cell (or aa = true) to run beside the baseline")
    if asked and alone:
        raise ExperimentError(
            f"experiment.duet = true: the baseline {alone[0]!r} is its table's only cell, so no duet would run it; "
            "set duet = false"
        )
    if asked and "capacity" in modes:
        raise ExperimentError(
            'experiment.duet = true: a capacity search (load.mode = "capacity") runs each cell alone; set duet = false'
        )
    return asked
