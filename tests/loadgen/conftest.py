"""loadgen's `_xfer_*` helpers are plain modules next to the locustfile (Locust skips `_` names)."""

import sys
from pathlib import Path

LOADGEN = str(Path(__file__).resolve().parents[2] / "loadgen")
if LOADGEN not in sys.path:
    sys.path.insert(0, LOADGEN)
