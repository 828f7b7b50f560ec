"""The runner's former home, kept while its importers move to xferbench/run/ (the sweep, one run's
lifecycle, its load phase, its outputs). Every name importers read is re-exported here; cli.py reads
`runner.UntilCI` at call time, so a test that patches it here still reaches the sweep."""

from __future__ import annotations

from xferbench.run.handle import ServerHandle
from xferbench.run.lifecycle import UNDERSERVED, _interruption, collect, measure, run_one, start, stop, warnings
from xferbench.run.live import CellFailed, Live, new_row
from xferbench.run.phase import GEN_TAIL_MARGIN_S, load_phase
from xferbench.run.serverstart import container_engine, kill_everything
from xferbench.run.sweep import Ranked, SweepResult, UntilCI, _more_rounds, ci_half_width, machine_info, sweep, utc_stamp
from xferbench.run.unit import run_unit

__all__ = [
    "GEN_TAIL_MARGIN_S",
    "UNDERSERVED",
    "CellFailed",
    "Live",
    "Ranked",
    "ServerHandle",
    "SweepResult",
    "UntilCI",
    "_interruption",
    "_more_rounds",
    "ci_half_width",
    "collect",
    "container_engine",
    "kill_everything",
    "load_phase",
    "machine_info",
    "measure",
    "new_row",
    "run_one",
    "run_unit",
    "start",
    "stop",
    "sweep",
    "utc_stamp",
    "warnings",
]
