"""Every repository path the documents name exists: README.md, loadgen/README.md, servers/*/README.md,
deploy/README.md, proto/PROTOCOL.md and docs/*.md. A path is a backticked word (or a link target) that starts
with one of the repository's top-level entries or with a directory beside the document, or a file name with a
known extension; it may be relative to the document, the repository, or a directory named earlier in the same
section (`tests/servers/fault/` … `test_toxics.py`). Globs must match."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.markdown import is_heading, named_in_line, prose_lines

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "loadgen" / "README.md", *sorted(ROOT.glob("servers/*/README.md")),
        ROOT / "deploy" / "README.md", ROOT / "proto" / "PROTOCOL.md", *sorted(ROOT.glob("docs/*.md"))]
EXTENSIONS = (".md", ".py", ".go", ".c", ".h", ".toml", ".yml", ".yaml", ".json", ".sh", ".proto", ".vectors",
              ".Dockerfile", ".jsonl", ".csv", ".html", ".mod", ".sum", ".log", ".prom", ".txt")
# Paths that exist only once something ran, each with what writes it.
GENERATED = {
    "build": "make build (ignored by git)",
    "results": "xferbench run (ignored by git)",
    "runs.jsonl": "a run directory's file, written by xferbench run",
    "summary.csv": "a run directory's file, written by xferbench run",
    "summary.md": "a run directory's file, written by xferbench run",
    "report.html": "a run directory's file, written by xferbench run",
    "stress.html": "a stepped run directory's chart, written by xferbench run",
    "experiment.json": "a run directory's file, written by xferbench run",
    "timeseries": "a run directory's folder, written by xferbench run",
    "logs": "a run directory's folder, written by xferbench run",
}
# Paths a user may create; the documents say so where they name them.
OPTIONAL = {
    "deploy/.env": "docker compose reads it when a user writes one",
}
# Files of other projects, cited for how they do a thing.
EXTERNAL = {
    "thread.c": "memcached's, cited by servers/c/README.md for its hand-off of connections to threads",
}
TOP_LEVEL = {p.name for p in ROOT.iterdir()} | set(GENERATED)


def looks_like_a_path(word: str, bases: list[Path]) -> bool:
    if not word or "://" in word or word.startswith(("/", "-", "$", "~", "http")) or any(c in word for c in "<>{}=…|"):
        return False
    if "/" not in word and (word.startswith(".") or "*" in word):
        return False  # an extension (`.py`) or a pattern of names (`xferd-*.json`), not a path
    first = word.split("/", 1)[0]
    if "/" in word:
        if first.isupper() or first in ("", ".", ".."):
            return False  # a placeholder (DIR/files/) or a relative name in an example
        return first in TOP_LEVEL or any((b / first).exists() for b in bases)
    return word.endswith(EXTENSIONS)


def exists(word: str, bases: list[Path]) -> bool:
    for base in bases:
        if any(c in word for c in "*?["):
            if any(base.glob(word.rstrip("/"))):
                return True
        elif (base / word).exists():
            return True
    return False


def missing_paths(doc: Path) -> list[str]:
    out = []
    dirs_in_section: list[Path] = []
    for n, line in prose_lines(doc.read_text()):
        if is_heading(line):
            dirs_in_section = []
        for word in named_in_line(line):
            bases = [doc.parent, ROOT, *dirs_in_section]
            if not looks_like_a_path(word, bases):
                continue
            first = word.split("/", 1)[0]
            if exists(word, bases):
                dirs_in_section += [b / word for b in bases if (b / word).is_dir()]
            elif not (first in GENERATED or word.rstrip("/") in GENERATED or word in OPTIONAL or word in EXTERNAL):
                out.append(f"{doc.relative_to(ROOT)}:{n}: `{word}`")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_path_a_document_names_exists(doc: Path) -> None:
    missing = missing_paths(doc)
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_the_path_check_sees_paths() -> None:
    """It finds what a document names (so an empty result above means something)."""
    readme = (ROOT / "README.md").read_text()
    named = [w for _n, line in prose_lines(readme) for w in named_in_line(line)]
    assert "proto/PROTOCOL.md" in named and "tests/servers/badinput/" in named
    assert looks_like_a_path("servers/go/nope.go", [ROOT]) and not exists("servers/go/nope.go", [ROOT])
