"""The import rule of xferbench/ ([tool.importlinter] in pyproject.toml: no cycles, the layers, only the CLI
imports the report and the side tools) holds: the suite fails on a wrong-way import, not only `make lint`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # the venv's, installed with the dev dependencies


def test_imports_keep_every_contract() -> None:
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} is missing: run `make setup` (pyproject.toml's dev extra)"
    # No cache: the graph is read from the files as they are now, and nothing is written into the tree.
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
