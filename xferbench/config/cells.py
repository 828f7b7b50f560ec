"""One [[servers]] group to its cells: the server and its keys, then every axis (flags, env, limits, load
overrides), then one cell per point of their product, named by the group's label and the values that vary.

A cell's name spells each value as the file wrote it (`gomemlimit=24MiB`), while the cell holds the checked
value its server is given (`GOMEMLIMIT=25165824`); the name its checked values would spell is kept as an alias,
so that a baseline may be written either way."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import loadgen
from py_client.sizes import parse_size
from xferbench.config import command, servers, tls
from xferbench.config.files import ROOT
from xferbench.config.load import _check_load_value, _resolve_mode
from xferbench.config.model import LOAD_KEYS, Cell, ExperimentError, Limits, Load
from xferbench.config.values import LIMIT_KEYS, _as_axis, _table, _unknown

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GROUP_KEYS = ("server", "label", "name", "binary", "args", "flags", "env", "load", "limits", "image", "host")


@dataclass(frozen=True)
class _Value:
    """One value of an axis: as the file spells it (the cell's name) and as checked (what the cell holds)."""

    shown: str
    value: Any

    @property
    def canonical(self) -> str:
        return str(self.value)


Axis = tuple[str, str, list[_Value]]  # (kind: flag | env | limit | load, key, values)


@dataclass(frozen=True)
class _Group:
    """A [[servers]] group's keys that every one of its cells shares."""

    where: str
    kind: servers.ServerKind
    label: str
    binary: str
    args: tuple[str, ...]
    image: str | None = None
    template: str | None = None  # the group's `name`: a format string of the cell's values
    host: str | None = None  # the [hosts] name its server runs on (config/hosts.py checks it is declared)


def _group_cells(g: dict[str, Any], where: str, base: Load, folder: Path) -> tuple[list[Cell], list[tuple[str, str]]]:
    """The group's cells, and (the name its checked values would spell, the cell's name) of each cell whose
    values the file spells otherwise."""
    group, g = _group(g, where, folder)
    # One order of checks (server, label, binary, args, flags, env, image, limits, load, name), so a group with
    # several faults always names the same one first.
    flag_axes = _flag_axes(group, _table(g.get("flags", {}), f"{where}.flags"))
    env_axes = _env_axes(_table(g.get("env", {}), f"{where}.env"), where)
    image = g.get("image")
    if image is not None and (not isinstance(image, str) or not image):
        raise ExperimentError(f"{where}.image = {image!r}: expected an image name (localhost/xferbench/xferd-go:dev)")
    limit_axes = _limit_axes(_table(g.get("limits", {}), f"{where}.limits"), where)
    load_axes = _load_axes(group, _table(g.get("load", {}), f"{where}.load"), base)
    template = g.get("name")
    if template is not None and not isinstance(template, str):
        raise ExperimentError(f'{where}.name = {template!r}: expected a template string like "go-{{pool}}"')
    host = g.get("host")
    if host is not None and (not isinstance(host, str) or not host):
        raise ExperimentError(f'{where}.host = {host!r}: expected the name of a [hosts] table (e.g. host = "app")')
    group = replace(group, image=image, template=template, host=host)
    axes = [*flag_axes, *env_axes, *limit_axes, *load_axes]
    cells: list[Cell] = []
    aliases: list[tuple[str, str]] = []
    for combo in itertools.product(*(vals for _, _, vals in axes)):
        cell, canonical = _cell(group, axes, combo, base)
        cells.append(cell)
        if canonical != cell.name:
            aliases.append((canonical, cell.name))
    return cells, aliases


def _kind(server: Any, g: dict[str, Any], where: str, folder: Path) -> tuple[servers.ServerKind, dict[str, Any]]:
    """The kind the group's `server` names, and its table without a command server's own keys (read by
    xferbench/config/command.py, its relative paths starting at `folder`)."""
    if server == command.NAME:  # any executable: its [[servers]] entry is its description
        try:
            return command.group(g, where, folder)
        except command.CommandError as e:
            raise ExperimentError(str(e)) from None
    if not isinstance(server, str) or server not in servers.SERVERS:
        raise ExperimentError(f"{where}.server = {server!r}: expected {' | '.join([*servers.SERVERS, command.NAME])}")
    return servers.SERVERS[server], g


def _group(g: dict[str, Any], where: str, folder: Path) -> tuple[_Group, dict[str, Any]]:
    """The group's server, label, binary and args, and its table without a command server's own keys (its
    relative paths start at `folder`, the experiment file's)."""
    kind, g = _kind(g.get("server"), g, where, folder)
    _unknown(g, _GROUP_KEYS, where)
    label = g.get("label", kind.label)
    if not isinstance(label, str) or not label:
        raise ExperimentError(f"{where}.label = {label!r}: expected a non-empty string")
    binary = g.get("binary")
    if binary is None:
        binary = kind.default_binary()
    elif not isinstance(binary, str):
        raise ExperimentError(f"{where}.binary = {binary!r}: expected a path")
    else:
        binary = str((ROOT / binary) if not Path(binary).is_absolute() else Path(binary))
    args = g.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ExperimentError(f"{where}.args = {args!r}: expected a list of strings")
    return _Group(where, kind, label, binary, tuple(args)), g


def _spelled(item: Any, value: Any) -> str:
    """How a cell's name spells a value: a string as the file wrote it ("24MiB", "10s"), anything else (a
    number) as its checked value prints."""
    return item if isinstance(item, str) else str(value)


def _checked_axis(values: list[Any], check: Callable[[Any], Any], where: str) -> list[_Value]:
    """Each value of an axis through its validator, whose ValueError says what the key expects."""
    vals: list[_Value] = []
    for item in values:
        try:
            value = check(item)
        except ValueError as e:
            raise ExperimentError(f"{where} = {item!r}: expected {e}") from None
        vals.append(_Value(_spelled(item, value), value))
    if not vals:
        raise ExperimentError(f"{where}: empty list")
    return vals


def _flag_axes(group: _Group, flags: dict[str, Any]) -> list[Axis]:
    axes: list[Axis] = []
    # Named where the file writes them: [servers.flags], or a command server's entry itself (alloc, gogc, ...).
    table = f"{group.where}.{group.kind.flag_path}"
    for k, v in flags.items():
        if k not in group.kind.flags:
            raise ExperimentError(f"{table}{k}: unknown flag of {group.kind.name}; allowed: " + ", ".join(group.kind.flags))
        axes.append(("flag", k, _checked_axis(_as_axis(v), group.kind.flags[k], f"{table}{k}")))
    return axes


def _env_axes(env: dict[str, Any], where: str) -> list[Axis]:
    axes: list[Axis] = []
    for k, v in env.items():
        if not _ENV_NAME_RE.match(k):
            raise ExperimentError(f"{where}.env.{k}: not a valid environment variable name")
        vals = _as_axis(v)
        if not vals or not all(isinstance(x, str | int | float) and not isinstance(x, bool) for x in vals):
            raise ExperimentError(
                f'{where}.env.{k} = {v!r}: expected a string or a list of strings ("" leaves the variable unset)'
            )
        axes.append(("env", k, [_Value(str(x), str(x)) for x in vals]))
    return axes


def _limit_axes(limits: dict[str, Any], where: str) -> list[Axis]:
    axes: list[Axis] = []
    for k, v in limits.items():
        if k not in LIMIT_KEYS:
            raise ExperimentError(f"{where}.limits.{k}: unknown key; allowed: {', '.join(LIMIT_KEYS)}")
        axes.append(("limit", k, _checked_axis(_as_axis(v), LIMIT_KEYS[k], f"{where}.limits.{k}")))
    return axes


def _load_axes(group: _Group, load_over: dict[str, Any], base: Load) -> list[Axis]:
    """[servers.load] overrides; a server serving one transport only gets it when [load] names another."""
    where, transports = group.where, group.kind.transports
    axes: list[Axis] = []
    for k, v in load_over.items():
        vals: list[_Value] = []
        for x in _as_axis(v):
            checked = _check_load_value(k, x, f"{where}.load")
            vals.append(_Value(_spelled(x, checked), checked))
        if not vals:
            raise ExperimentError(f"{where}.load.{k}: empty list")
        if k == "transport":
            for t in vals:
                if t.value not in transports:
                    raise ExperimentError(
                        f"{where}.load.transport = {t.value!r}: {group.kind.name} serves " + " | ".join(transports)
                    )
        axes.append(("load", k, vals))
    if "transport" not in load_over and base.transport not in transports:
        if len(transports) == 1:
            axes.append(("load", "transport", [_Value(transports[0], transports[0])]))
        else:
            raise ExperimentError(f"load.transport = {base.transport!r}: {group.kind.name} serves " + " | ".join(transports))
    return axes


def _cell(group: _Group, axes: list[Axis], combo: tuple[_Value, ...], base: Load) -> tuple[Cell, str]:
    """The cell at one point of the group's axes, and the name its checked values would spell."""
    values: dict[str, dict[str, Any]] = {"flag": {}, "env": {}, "load": {}, "limit": {}}
    shown: dict[str, str] = {}  # the values that vary, as the file spells them
    canonical: dict[str, str] = {}  # ... and as checked
    for (kind, key, vals), v in zip(axes, combo, strict=True):
        values[kind][key] = v.value
        if len(vals) > 1:
            shown[key] = v.shown if v.value != "" else "default"
            canonical[key] = v.canonical if v.value != "" else "default"
    shown_flags = {key: v.shown for (kind, key, _), v in zip(axes, combo, strict=True) if kind == "flag"}
    cflags, cenv, limit_vals = values["flag"], values["env"], values["limit"]
    load = _resolve_mode(replace(base, **values["load"]), group.where)
    _check_calls(group, load)
    cell_limits = Limits(
        float(limit_vals["cpus"]) if "cpus" in limit_vals else None,
        parse_size(limit_vals["memory"]) if "memory" in limit_vals else None,
    )
    name = _name(group, load, shown, shown_flags, cenv, limit_vals)
    _check_tls(group, load, name)
    cell = Cell(name, group.kind, group.binary, cflags, cenv, group.args, load, shown, cell_limits, group.image,
                group.host)
    return cell, _name(group, load, canonical, cflags, cenv, limit_vals)


def _name(group: _Group, load: Load, axis_vals: dict[str, str], flags: dict[str, Any], cenv: dict[str, Any],
          limit_vals: dict[str, Any]) -> str:
    """The group's `name` template filled, else the label, the transport and every value that varies (and the tls
    mode of a load over TLS)."""
    if group.template:
        return _templated_name(group, group.template, load, flags, cenv, limit_vals)
    parts = [group.label, load.transport] + [f"{k}={v}" for k, v in axis_vals.items() if k != "transport"]
    if load.tls != "off" and "tls" not in axis_vals:  # a load over TLS says so, varying or not
        parts.append(f"tls={load.tls}")
    return "/".join(parts)


def _check_calls(group: _Group, load: Load) -> None:
    """The mix's calls against those the kind serves (its `calls`): a call it does not serve would fail every
    time, and the figures would be of the errors. The user's own calls and users are theirs."""
    if load.call is not None or load.locustfile is not None:
        return
    calls = group.kind.calls
    asked = [m for m, w in loadgen.option("mix").parse(load.mix).items() if w > 0]
    unserved = [m for m in asked if m not in calls]
    if unserved:
        serves = ", ".join(calls)
        example = ",".join(f"{m}:1" for m in calls)
        raise ExperimentError(
            f"{group.where}: load.mix = {load.mix!r}: {group.kind.name} does not serve {', '.join(unserved)} "
            f'(it serves {serves}); give a mix of those, e.g. mix = "{example}" in [load] or [servers.load]'
        )


def _check_tls(group: _Group, load: Load, name: str) -> None:
    """The load's tls mode against the kind's TLS listeners and the driver's TLS client, naming the cell."""
    kind = group.kind
    why = tls.refusal(load.tls, kind.name, kind.launcher == "command", kind.tls_transports, load.transport,
                      load.driver, load.locustfile)
    if why is not None:
        raise ExperimentError(f"{group.where}: load.tls = {load.tls!r} (cell {name!r}): {why}")


def _templated_name(
    group: _Group, template: str, load: Load, cflags: dict[str, Any], cenv: dict[str, Any], limit_vals: dict[str, Any]
) -> str:
    """The group's `name` template filled with the cell's label, server, transport and every value."""
    fmt = {
        "label": group.label,
        "server": group.kind.name,
        "transport": load.transport,
        **cflags,
        **{k: (v or "default") for k, v in cenv.items()},
        **{k: getattr(load, k) for k in LOAD_KEYS},
        **{k: limit_vals.get(k, "none") for k in LIMIT_KEYS},
    }
    try:
        return template.format(**fmt)
    except (KeyError, IndexError, ValueError) as e:
        raise ExperimentError(
            f"{group.where}.name = {template!r}: unknown field {e}; allowed: " + ", ".join(sorted(fmt))
        ) from None
