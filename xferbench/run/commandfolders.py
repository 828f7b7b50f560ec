"""The folders of one start of a command server (xferbench/config/command.py): `{dir}`, where its
[servers.files] templates are rendered, and `{tmpdir}`, a fresh folder removed once the server stops.

`{dir}` is the run's own (RUN_DIR/files/<run>/, kept with its logs, so the configuration a run had can be read
afterwards); without a run folder (a test starting the server itself) it is a temporary one, removed too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from xferbench.config import command


class Folders:
    """The folders a start's placeholders name (`values`: dir= and tmpdir=, those the command uses), and
    those to remove once the server has stopped."""

    def __init__(self, cmd: command.Command, run_folder: Path | None) -> None:
        self.values: dict[str, str] = {}
        self._remove: list[Path] = []
        if "dir" in cmd.dirs:
            if run_folder is not None:
                run_folder.mkdir(parents=True, exist_ok=True)
                self.values["dir"] = str(run_folder)
            else:
                self.values["dir"] = self._temporary("xferbench-dir-")
        if "tmpdir" in cmd.dirs:
            self.values["tmpdir"] = self._temporary("xferbench-tmpdir-")

    def _temporary(self, prefix: str) -> str:
        path = Path(tempfile.mkdtemp(prefix=prefix))
        self._remove.append(path)
        return str(path)

    def render(self, cmd: command.Command, values: Mapping[str, object]) -> None:
        """Each template, its placeholders filled, written into {dir}."""
        for t in cmd.files:
            write_atomic(Path(self.values["dir"]) / t.name, cmd.fill(t.text, values))

    def remove(self) -> None:
        for path in self._remove:
            shutil.rmtree(path, ignore_errors=True)
        self._remove = []


def write_atomic(path: Path, text: str) -> None:
    """`text` as `path`, written under a temporary name and renamed: a reader (the server, a person) never
    sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
