"""The paths of a command server's entry (xferbench/config/command.py): its program, its [servers.files]
templates and its `cwd`, each relative to the experiment file's folder, read and checked when the experiment
is read. Rendering a template at each start is xferbench/run/commandserver.py's.

    [servers.files]
    "nginx.conf" = "nginx.conf.in"   # rendered as {dir}/nginx.conf at each start, its placeholders filled
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from xferbench.config import placeholders


class PathError(ValueError):
    """A path of a command server's entry that cannot be used; the message names the key and the path tried."""


@dataclass(frozen=True)
class Template:
    """One [servers.files] entry: `name` (relative to {dir}) rendered from `text`, read from `source`."""

    name: str
    source: Path
    text: str


def program(exe: str, folder: Path, where: str) -> Path:
    """command[0]: a path (it has a slash) against the experiment's folder, else a name on PATH."""
    if "/" not in exe:
        found = shutil.which(exe)
        if found is None:
            raise PathError(f"{where}.command[0] = {exe!r}: not found on PATH")
        return Path(found)
    path = Path(exe).expanduser()
    if path.is_absolute():  # checked when it starts (the runner's message names it): it may be an image's path
        return path         # under backend = "docker", whose missing `image` is the fault to name then
    if not (folder / path).is_file():
        raise PathError(f"{where}.command[0] = {exe!r}: {folder / path} does not exist (a relative path starts at "
                        "the experiment file's folder)")
    return folder / path


def cwd(v: Any, folder: Path, where: str) -> Path | None:
    """`cwd`: the server's working directory, an existing folder; None: the runner's own."""
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise PathError(f"{where}.cwd = {v!r}: expected a folder's path (relative to the experiment file's folder)")
    path = Path(v).expanduser()
    path = path if path.is_absolute() else folder / path
    if not path.is_dir():
        raise PathError(f"{where}.cwd = {v!r}: {path} is not a folder")
    return path


def templates(v: Any, folder: Path, where: str) -> tuple[Template, ...]:
    """[servers.files]: each target name and its template, read now, its placeholders checked."""
    if v is None:
        return ()
    if not isinstance(v, Mapping):
        raise PathError(f'{where}.files = {v!r}: expected a table, e.g. "nginx.conf" = "nginx.conf.in"')
    return tuple(_template(name, src, folder, f"{where}.files.{name}") for name, src in v.items())


def _template(name: str, src: Any, folder: Path, where: str) -> Template:
    target = PurePosixPath(name)
    if not name or target.is_absolute() or ".." in target.parts:
        raise PathError(f"{where}: the target must be a file name inside {{dir}}, e.g. \"nginx.conf\"")
    if not isinstance(src, str) or not src:
        raise PathError(f"{where} = {src!r}: expected the template's path (relative to the experiment file's folder)")
    path = Path(src).expanduser()
    path = path if path.is_absolute() else folder / path
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PathError(f"{where} = {src!r}: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    for n, line in enumerate(text.splitlines(), 1):
        try:
            placeholders.check(line, f"{where} ({path}, line {n})")
        except placeholders.PlaceholderError as e:
            raise PathError(str(e)) from None
    return Template(str(target), path, text)
