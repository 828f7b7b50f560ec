"""The placeholders of a command server's entry (xferbench/config/command.py): which a text uses, which are
valid where, and filling them in.

`{port}` and `{<name>_port}` get a free loopback port at each start; `{dir}` names the start's own folder (its
rendered [servers.files]); `{tmpdir}` a fresh folder removed once the server stops; `{cert}` and `{key}` the
run's throwaway server certificate and its key (PEM, xferbench/config/tls.py), valid where the folders are;
`{addr}` the address the server must listen on, valid everywhere: 127.0.0.1 for a host process here, the host's
address as the host check found it for a server on another host (`[[servers]] host`), 0.0.0.0 inside a container
(whose published ports are reached at 127.0.0.1: in the URLs the runner reads, `{addr}` is that). Any
other `{name}` is a typo (`{metrics-port}`, `{port2}`) and refused where it is written. `${name}` is left alone:
it is a shell's (`sh -c "... ${HOME}"`) or nginx's, never ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# A name in braces, not after a `$`; a regular expression's `{3}` or `{2,5}` is no name.
TOKEN = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
PORT = re.compile(r"(?:[a-z][a-z0-9]*_)*port")
DIRS = ("dir", "tmpdir")
FILES = ("cert", "key")  # the run's TLS certificate and key: paths, so valid where the folders are
ADDR = "addr"  # where the server listens (and, in a URL the runner reads, where it is reached)
PORTS_HELP = "{port}, {<name>_port} (e.g. {metrics_port})"


class PlaceholderError(ValueError):
    """A text naming a placeholder that is not one; the message lists the valid ones."""


def used(texts: Iterable[str]) -> set[str]:
    return {m.group(1) for t in texts for m in TOKEN.finditer(t)}


def check(text: str, where: str, dirs: bool = True) -> None:
    """Raises PlaceholderError naming `where` when `text` has a placeholder that is not valid there: a port
    or `{addr}` anywhere, `{dir}`, `{tmpdir}`, `{cert}` and `{key}` only where `dirs` (not in an address)."""
    for m in TOKEN.finditer(text):
        name = m.group(1)
        if PORT.fullmatch(name) or name == ADDR or (dirs and name in (*DIRS, *FILES)):
            continue
        valid = PORTS_HELP + (", {dir}, {tmpdir}, {cert}, {key}" if dirs else "") + ", {addr}"
        raise PlaceholderError(f"{where} = {text!r}: unknown placeholder {{{name}}}; valid here: {valid}")


def fill(text: str, values: Mapping[str, object]) -> str:
    return TOKEN.sub(lambda m: str(values[m.group(1)]), text)


def in_url(address: str) -> str:
    """An address as a URL's host takes it: an IPv6 one in brackets."""
    return f"[{address}]" if ":" in address else address
