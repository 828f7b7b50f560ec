"""Fixtures shared by every suite: real server processes on loopback."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

# Before anything imports grpc: its fork handlers can deadlock a later fork (subprocess.Popen hanging inside
# grpc's prefork handler, grpc/grpc#37259), and every test forks servers after using gRPC channels in-process.
# The suite only ever forks to exec, which needs no fork support.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import pytest

from tests.support.servers import RunningServer, running_server, selected_servers

pytest_plugins = ["tests.support.schedule"]  # the longest files first, for pytest-xdist

# A shell that starts the suite in the background (`make test &` in a script) hands it SIGINT ignored, and every
# process it starts inherits that: the Ctrl-C tests send SIGINT to `xferbench run`, which must feel it. A
# handler (not SIG_IGN) is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module", params=selected_servers())
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[RunningServer]:
    """One server per module and server kind, with a disk store in a fresh folder."""
    store = tmp_path_factory.mktemp("store")
    with running_server(request.param, [f"--store=disk:{store}"]) as s:
        yield s
