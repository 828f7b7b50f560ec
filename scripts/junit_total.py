"""Totals pytest's JUnit XML files in one plain line, `tests: N passed, N failed, N skipped` (.ci/run's last
line). A missing file counts as a failure: that suite did not run to its end."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(paths: list[str]) -> int:
    passed = failed = skipped = 0
    for path in paths:
        if not Path(path).exists():
            print(f"tests: {path} is missing: that suite did not finish", file=sys.stderr)
            failed += 1
            continue
        for suite in ET.parse(path).getroot().iter("testsuite"):
            total, errors = int(suite.get("tests", 0)), int(suite.get("errors", 0))
            failures, skips = int(suite.get("failures", 0)), int(suite.get("skipped", 0))
            failed += failures + errors
            skipped += skips
            passed += total - failures - errors - skips
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
