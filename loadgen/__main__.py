"""`python -m loadgen`: every --xfer-* option with its default, environment variable and help.

Locust prints `--help` before it imports a locustfile, so `locust -f loadgen/ --help` cannot list them.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence

from loadgen._options import OPTIONS


def options_text(width: int = 100) -> str:
    lines = ["loadgen options (after `locust -f loadgen/`; also settable in the web UI and as environment "
             "variables):", ""]
    for opt in OPTIONS:
        lines.append(f"  {opt.flag} (default: {opt.default or 'none'}; env {opt.env_var})")
        lines += textwrap.wrap(opt.help, width=width, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    sys.stdout.write(options_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
