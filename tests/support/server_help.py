"""What a server's `--help` says: its flags, each with its XFERD_* variable and the line that explains it."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from tests.support.servers import SERVERS

HELP_TIMEOUT_S = 10.0
# "  --max-frame SIZE   [env XFERD_MAX_FRAME]", then the meaning on the next line; "  --version" alone.
_FLAG = re.compile(r"^  --(?P<name>[a-z0-9-]+)(?: (?P<arg>\S+)\s+\[env (?P<env>XFERD_[A-Z0-9_]+)\])?$")


@dataclass(frozen=True)
class HelpFlag:
    name: str
    env: str | None  # None: not a setting (--version)
    meaning: str


def help_text(server: str) -> str:
    r = subprocess.run([str(SERVERS[server].binary), "--help"], capture_output=True, text=True,
                       timeout=HELP_TIMEOUT_S, check=True)
    return r.stdout


def help_flags(text: str) -> dict[str, HelpFlag]:
    lines = text.splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = _FLAG.match(line)
        if m:
            meaning = lines[i + 1].strip() if i + 1 < len(lines) else ""
            out[m["name"]] = HelpFlag(m["name"], m["env"], meaning)
    return out
