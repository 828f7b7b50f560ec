"""Where experiment files are: the repository's root (relative binaries are read against it) and the shipped
experiments in experiments/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS_DIR = ROOT / "experiments"


def resolve(path: str | Path) -> Path:
    """A path, or the name of a shipped experiment ("quick" → experiments/quick.toml)."""
    p = Path(path)
    if p.exists() or p.suffix == ".toml" or "/" in str(path):
        return p
    shipped = EXPERIMENTS_DIR / f"{path}.toml"
    return shipped if shipped.exists() else p


def shipped() -> list[Path]:
    return sorted(EXPERIMENTS_DIR.glob("*.toml"))
