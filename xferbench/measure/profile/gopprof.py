"""xferd-go's CPU samples: its own `/debug/pprof/profile?seconds=N` on the metrics address (a command
server's: under its `pprof` address), fetched for the measured window, folded by build/bin/pprof-fold
(servers/go/cmd/pprof-fold: Go, with github.com/google/pprof/profile, pprof's own parser — no Python parser
of profile.proto is kept up on PyPI, and the Go toolchain is here anyway to build xferd-go).
"""

from __future__ import annotations

import http.client
import os
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

from xferbench.config.files import ROOT
from xferbench.measure.profile.classify import parse_folded
from xferbench.measure.profile.errors import ProfileError

FOLD_TIMEOUT_S = 60.0


def fold_binary() -> Path:
    return Path(os.environ.get("PPROF_FOLD_BIN") or ROOT / "build" / "bin" / "pprof-fold")


def check() -> None:
    b = fold_binary()
    if not os.access(b, os.X_OK):
        raise ProfileError(f"profile: {b} is missing (run `make build`; it folds xferd-go's CPU profiles)")


class PprofSampler:
    """A GET of the server's CPU profile for `seconds` (whole seconds: the handler takes an integer),
    started at once on a thread; `finish()` returns its folded stacks."""

    def __init__(self, base_url: str, seconds: float, data_path: Path) -> None:
        """`base_url`: where the pprof handlers are, e.g. http://127.0.0.1:6060/debug/pprof."""
        check()
        self.seconds = max(1, round(seconds))
        self.url = f"{base_url.rstrip('/')}/profile?seconds={self.seconds}"
        self.data_path = data_path
        self.error: str | None = None
        self._thread = threading.Thread(target=self._fetch, name="pprof-fetch", daemon=True)
        self._thread.start()

    def _fetch(self) -> None:
        try:
            with urllib.request.urlopen(self.url, timeout=self.seconds + 30) as resp:
                self.data_path.write_bytes(resp.read())
        except http.client.HTTPException as e:  # its text is whatever the port answered, often binary
            self.error = f"no HTTP/1.1 answer there ({type(e).__name__}): is it the pprof address?"
        except (urllib.error.URLError, OSError) as e:
            body = e.read().decode(errors="replace").strip() if isinstance(e, urllib.error.HTTPError) else ""
            self.error = f"{e} {body}".strip()

    def finish(self, timeout_s: float) -> dict[str, int]:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise ProfileError(f"profile: {self.url} did not answer within {timeout_s:.0f}s of its window")
        if self.error is not None:
            raise ProfileError(f"profile: GET {self.url}: {self.error}")
        try:
            out = subprocess.run([str(fold_binary()), str(self.data_path)], capture_output=True,
                                 timeout=FOLD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ProfileError(f"profile: pprof-fold took over {FOLD_TIMEOUT_S:.0f}s") from None
        if out.returncode != 0:
            raise ProfileError(f"profile: pprof-fold: {out.stderr.decode(errors='replace').strip()[-300:]}")
        return parse_folded(out.stdout.decode(errors="replace"))

    def stop(self) -> None:
        """Nothing to end: the server ends the profile itself; the thread is a daemon bounded by its timeout."""
