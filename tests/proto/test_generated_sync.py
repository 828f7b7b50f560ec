"""Committed generated code and test vectors must equal a fresh generation (`make proto`)."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

from tests.support.servers import ROOT

GENERATED_DIRS = ["servers/go/gen/xferv1", "servers/c/gen/xfer/v1", "xfer/v1"]
VECTOR_FILES = ["gen.vectors", "frames.vectors", "bodies.vectors", "headers.vectors", "quote.vectors",
                "meta.vectors"]


def _differences(committed: Path, fresh: Path) -> list[str]:
    cmp = filecmp.dircmp(committed, fresh, ignore=["__pycache__"])
    return [f"only committed: {n}" for n in cmp.left_only] + [f"only fresh: {n}" for n in cmp.right_only] + [
        f"differs: {n}" for n in filecmp.cmpfiles(committed, fresh, cmp.common_files, shallow=False)[1]
    ]


def test_generated_code_matches_a_fresh_generation(tmp_path: Path) -> None:
    subprocess.run(["bash", str(ROOT / "scripts/gen-proto.sh"), str(tmp_path)], check=True,
                   env={**os.environ, "PYTHON": sys.executable})
    problems = {d: _differences(ROOT / d, tmp_path / d) for d in GENERATED_DIRS}
    assert not any(problems.values()), f"generated code is stale; run `make proto`: {problems}"


def test_vectors_match_a_fresh_generation(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "proto/testdata/make_vectors.py"), str(tmp_path)], check=True)
    stale = [f for f in VECTOR_FILES if (ROOT / "proto/testdata" / f).read_bytes() != (tmp_path / f).read_bytes()]
    assert not stale, f"test vectors are stale; run `make proto`: {stale}"

