"""The text of a program sent to another host as `python -c TEXT` (the watches of generators.py and
remoteserver.py), with the xferbench modules it imports: each module's own text, made a module of its own name
there, then the program's, run as __main__. Those modules are standard library only (xferbench/measure/hoststat.py),
so the host needs a Python, not xferbench; and what is read there is the very text this checkout imports here.

A program imports such a module as `from xferbench.measure.hoststat import sample`: Python finds the name in
sys.modules without importing the packages above it, which the host may lack. Each text is compiled apart, so each
keeps its own `from __future__` line first, and its own name in a traceback.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

# Linux takes one argument of at most 128 KiB (MAX_ARG_STRLEN), and ssh hands the remote shell the whole command
# line as one: a program past this would fail to start, on the host, with an error that says nothing of why.
MAX_TEXT = 100_000


def _text(module: ModuleType) -> str:
    assert module.__file__ is not None, module.__name__
    return Path(module.__file__).read_text(encoding="utf-8")


def program(main: ModuleType, *needs: ModuleType) -> str:
    """`main`'s text as one `python -c` program, after the modules of `needs` (in that order)."""
    lines = ["import sys, types"]
    for m in needs:
        lines += [
            f"_m = sys.modules[{m.__name__!r}] = types.ModuleType({m.__name__!r})",
            f"exec(compile({_text(m)!r}, {m.__name__!r}, 'exec'), _m.__dict__)",
        ]
    lines.append(f"exec(compile({_text(main)!r}, {main.__name__!r}, 'exec'), {{'__name__': '__main__'}})")
    text = "\n".join(lines) + "\n"
    if len(text) > MAX_TEXT:
        raise ValueError(
            f"the program {main.__name__} with {', '.join(m.__name__ for m in needs)} is {len(text)} "
            f"characters, past the {MAX_TEXT} one command line argument can carry"
        )
    return text
