"""The ssh forward to another host's engine (xferbench/run/containers/forward.py), without a lab: a host whose ssh
fails is named with what ssh said, and leaves no ssh process and no socket folder behind; the folders that runners
killed outright left are removed by the next one, and no other. The forward that works, through a lab host's sshd
to its engine, is tests/run/containers/test_remote_engine.py's."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.runs import processes_mentioning
from xferbench.config import Host
from xferbench.run.containers import forward
from xferbench.run.containers.engine import EngineError


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_host_whose_ssh_fails_is_named_and_leaves_nothing(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(f"Host nowhere\n  HostName 127.0.0.1\n  Port {_closed_port()}\n")
    host = Host("app", "nowhere", str(config), engine="unix:///run/podman/podman.sock")
    with pytest.raises(EngineError) as e:
        forward.Forward(host, timeout_s=15)
    said = str(e.value)
    assert said.startswith("app (nowhere): ssh: connect to host 127.0.0.1 port "), said
    assert said.endswith("Connection refused"), said
    assert forward.open_count() == 0
    assert processes_mentioning(str(config)) == []  # no ssh left
    assert not list(Path(tempfile.gettempdir()).glob(f"{forward.PREFIX}{os.getpid()}-*"))  # no socket folder


def test_the_forwards_command_line_binds_a_socket_of_its_own_to_the_engines() -> None:
    host = Host("app", "root@10.77.0.2", "/x/ssh_config", engine="unix:///run/podman/podman.sock")
    argv = forward.argv(host, Path("/tmp/f/engine.sock"))
    assert argv[0] == "ssh" and argv[-1] == "root@10.77.0.2" and argv[-3:-1] == ["-F", "/x/ssh_config"]
    assert "-N" in argv and "ExitOnForwardFailure=yes" in argv and "StreamLocalBindMask=0177" in argv
    assert argv[argv.index("-L") + 1] == "/tmp/f/engine.sock:/run/podman/podman.sock"
    assert "BatchMode=yes" in argv  # never a prompt, as every session of xferbench/run/remote.py
    with pytest.raises(EngineError, match=r"^app \(root@10\.77\.0\.2\): no engine"):
        forward.Forward(Host("app", "root@10.77.0.2"))
    with pytest.raises(EngineError, match=r"^app \(root@10\.77\.0\.2\): ssh_config /x/ssh_config: no such file$"):
        forward.Forward(host)


def test_only_the_folders_of_runners_that_are_gone_are_removed() -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    tmp = Path(tempfile.gettempdir())
    dead = tmp / f"{forward.PREFIX}{ended.pid}-t1"
    mine = tmp / f"{forward.PREFIX}{os.getpid()}-t2"
    alive = tmp / f"{forward.PREFIX}1-t3"  # pid 1 lives
    for d in (dead, mine, alive):
        d.mkdir()
        (d / "engine.sock").write_text("")
    try:
        assert dead in forward.remove_stale()
        assert not dead.exists() and mine.is_dir() and alive.is_dir()
    finally:
        for d in (dead, mine, alive):
            for f in d.glob("*"):
                f.unlink()
            if d.exists():
                d.rmdir()
