"""A flame graph SVG from folded stacks, drawn by inferno's `inferno-flamegraph` (the maintained Rust port
of flamegraph.pl; `cargo install inferno`, which scripts/bootstrap.sh runs when cargo is there). No Python
package on PyPI renders folded stacks and is kept up (flameprof reads cProfile only, last released 2018)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from xferbench.config.files import ROOT

RENDER_TIMEOUT_S = 60.0


def renderer() -> str | None:
    explicit = os.environ.get("INFERNO_FLAMEGRAPH_BIN")
    if explicit:
        return explicit
    here = f"{ROOT / 'build' / 'bin'}:{Path.home() / '.cargo' / 'bin'}"  # where bootstrap and cargo put it
    return shutil.which("inferno-flamegraph") or shutil.which("inferno-flamegraph", path=here)


def render(folded_path: Path, svg_path: Path, title: str) -> str | None:
    """Writes the SVG; returns None, or why it was not drawn (the folded stacks stay beside it)."""
    exe = renderer()
    if exe is None:
        return "flame graph not drawn: inferno-flamegraph is not installed (cargo install inferno)"
    try:
        with open(folded_path, "rb") as src, open(svg_path, "wb") as dst:
            done = subprocess.run([exe, "--title", title, "--countname", "samples"], stdin=src, stdout=dst,
                                  stderr=subprocess.PIPE, timeout=RENDER_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"flame graph not drawn: {exe}: {e}"
    if done.returncode != 0:
        svg_path.unlink(missing_ok=True)
        return f"flame graph not drawn: {exe} exited {done.returncode}: {done.stderr.decode(errors='replace')[-200:]}"
    return None
