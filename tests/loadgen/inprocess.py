"""loadgen's option checks in the pytest process: Locust's own parser with loadgen's options registered, and
the start-up checks `_on_init` runs (loadgen._hooks.start_checks), without starting a Locust process.

Importing Locust monkey-patches the importer with gevent (`monkey.patch_all()` in locust/__init__.py). In the
pytest process that would turn every later test's threads and sockets into greenlets, and it fails outright
("RecursionError" in ssl) once ssl was imported before. So Locust is imported here, once, with
LOCUST_SKIP_MONKEY_PATCH set, and the variable is removed again at once: the `locust` processes the tests
start must patch themselves as usual. Every in-process use of Locust in the tests goes through this module.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
try:
    from locust.argument_parser import get_parser

    from loadgen._hooks import start_checks
    from loadgen._options import Config, register
finally:
    del os.environ["LOCUST_SKIP_MONKEY_PATCH"]


def parse(args: list[str]) -> Any:
    """The options `locust -f loadgen/ ARGS` would run with (argparse refuses a malformed value itself)."""
    parser = get_parser(default_config_files=[])
    register(parser)
    return parser.parse_args(["-f", "loadgen/", *args])


def accepted(args: list[str]) -> tuple[Config, str | None]:
    """The Config and transport of options the parser and the start-up checks accept."""
    opts = parse(args)
    return start_checks(opts, opts.host)


def refusal(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What loadgen says when Locust's parser or the start-up checks refuse `args` (after `-f loadgen/`);
    fails if they accept them. tests/loadgen/test_cli.py proves the `locust` command takes the same path."""
    parser = get_parser(default_config_files=[])
    register(parser)
    with pytest.raises(SystemExit) as exit_:
        opts = parser.parse_args(["-f", "loadgen/", *args])
        try:
            start_checks(opts, opts.host)
        except ValueError as e:
            parser.error(str(e))  # the same exit and form as locust: error: ... (hooks._fail_start)
    assert exit_.value.code == 2
    return capsys.readouterr().err
