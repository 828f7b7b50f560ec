"""Where experiment files are: the repository's root (relative binaries are read against it) and the shipped
experiments in experiments/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS_DIR = ROOT / "experiments"


def resolve(path: str | Path) -> Path:
    """A path, or the name of a shipped experiment in experiments/ or a folder below it ("quick" →
    experiments/quick.toml, "memcached" → experiments/third-party/memcached.toml)."""
    p = Path(path)
    if p.exists() or p.suffix == ".toml" or "/" in str(path):
        return p
    named = [s for s in shipped() if s.stem == str(path)]
    return named[0] if named else p


def shipped() -> list[Path]:
    """Every experiment under experiments/, its own folder's first, then each folder below it."""
    return sorted(EXPERIMENTS_DIR.rglob("*.toml"), key=lambda p: (len(p.relative_to(EXPERIMENTS_DIR).parts), p))
