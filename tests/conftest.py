"""Fixtures shared by every suite: real server processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import RunningServer, running_server, selected_servers


@pytest.fixture(scope="module", params=selected_servers())
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[RunningServer]:
    """One server per module and server kind, with a disk store in a fresh folder."""
    store = tmp_path_factory.mktemp("store")
    with running_server(request.param, [f"--store=disk:{store}"]) as s:
        yield s
