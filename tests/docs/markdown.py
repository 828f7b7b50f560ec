"""What the documents say, as data: the paths they name in backticks and links, and the commands in their
shell code blocks."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\w*)\s*$")
_TICKED = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Command:
    doc: Path
    line: int
    text: str  # without its trailing comment

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def is_heading(line: str) -> bool:
    return line.startswith("#")


def named_in_line(line: str) -> list[str]:
    """The words of a line's backticked spans and the targets of its Markdown links, in order."""
    spans = [(m.start(), w) for m in _TICKED.finditer(line) for w in m[1].split()]
    links = [(m.start(), m[1]) for m in _LINK.finditer(line)]
    return [w.strip(",;:()") for _pos, w in sorted(spans + links)]


def shell_commands(doc: Path) -> list[Command]:
    """Every command line of the ```sh blocks, without comments."""
    out, lang = [], None
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            lang = m[1] if lang is None else None
            continue
        if lang == "sh" and line.strip():
            text = re.sub(r"\s+#.*$", "", line).strip()
            if text and not text.startswith("#"):
                out.append(Command(doc, n, text))
    return out
