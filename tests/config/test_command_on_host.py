"""A command server on another host (`server = "command"` with `[[servers]] host`, xferbench/config/command.py and
hosts.py), as the file is read, with no lab: its program is the host's (never looked at here), `{addr}` is where it
listens, and what it cannot have is refused naming the key and why. `{addr}` filled for each place a command runs
(xferbench/run/commandserver.py's `launch`). That the host has the program is the host check's
(tests/run/test_remote_command.py)."""

from __future__ import annotations

import tomllib

import pytest

from xferbench import config as xe
from xferbench.config.command import Command
from xferbench.run import commandserver

HEAD = '[hosts.app]\nssh = "root@10.0.0.9"\n[load]\ntransport = "frame"\n'
ON_APP = """
[[servers]]
server = "command"
host = "app"
command = ["/opt/nowhere-here/xferd-c", "--frame-addr={addr}:{port}", "--metrics-addr={addr}:{metrics_port}"]
ready = { log = "^xferd-c ready " }
metrics = "http://{addr}:{metrics_port}/metrics"
"""


def _parse(text: str) -> xe.Experiment:
    return xe.parse(tomllib.loads(text), "e.toml")


def _refused(text: str) -> str:
    with pytest.raises(xe.ExperimentError) as e:
        _parse(text)
    return str(e.value)


def test_the_hosts_program_is_read_as_written_never_looked_at_here() -> None:
    """An absolute path this machine lacks, a Go key on it, and a name on the host's PATH: all the host's."""
    exp = _parse(HEAD + ON_APP + 'alloc = "jemalloc"\n')
    cell = exp.cells[0]
    assert isinstance(cell.kind, Command) and cell.host == "app" and exp.server_hosts == ("app",)
    assert cell.kind.argv[0] == "/opt/nowhere-here/xferd-c" and cell.flags == {"alloc": "jemalloc"}
    assert cell.kind.ports == ("port", "metrics_port")
    by_name = _parse(HEAD + ON_APP.replace("/opt/nowhere-here/xferd-c", "no-such-program-here") + "gogc = 100\n")
    assert by_name.cells[0].kind.argv[0] == "no-such-program-here"  # not resolved on this machine's PATH
    wildcard = _parse(HEAD + ON_APP.replace("={addr}:{", "=0.0.0.0:{"))
    assert wildcard.cells[0].kind.argv[1] == "--frame-addr=0.0.0.0:{port}"


def test_a_load_on_other_hosts_drives_a_command_on_a_host_of_its_own() -> None:
    exp = _parse(HEAD.replace("[load]\n", '[hosts.gen]\nssh = "gen"\n[load]\nhosts = ["gen"]\n') + ON_APP)
    assert exp.cells[0].load.hosts == ("gen",) and exp.load_hosts == ("gen",)


def _with(old: str, new: str, extra: str = "") -> str:
    return HEAD + ON_APP.replace(old, new) + extra


@pytest.mark.parametrize(("text", "said"), [
    (_with("/opt/nowhere-here/xferd-c", "bin/xferd-c"),
     "servers[0].command[0] = 'bin/xferd-c': a command server on another host (host = ...) runs the host's program: "
     "give its absolute path there or a name on the host's PATH"),
    (_with("{addr}:{", "127.0.0.1:{"),
     "a command server on another host (host = 'app') must listen at {addr}, the host's address, where the load and "
     "the runner reach it"),
    (_with('metrics = "http://{addr}:', 'metrics = "http://127.0.0.1:'),
     "servers[0].metrics = 'http://127.0.0.1:{metrics_port}/metrics': a command server on another host (host = "
     "'app') is reached from this machine, where loopback is not the host: name it by {addr}"),
    (_with('ready = { log = "^xferd-c ready " }', 'ready = { http = "http://localhost:{metrics_port}/metrics" }'),
     "servers[0].ready.http = 'http://localhost:{metrics_port}/metrics': a command server on another host"),
    (_with('"--frame-addr={addr}', '"--store=disk:{tmpdir}", "--frame-addr={addr}'),
     "servers[0]: {tmpdir} is not for a command server on another host (host = 'app'): the runner's folders and "
     "files are this machine's"),
    (_with('ready = { log = "^xferd-c ready " }', 'ready = { log = "{dir}" }'),
     "servers[0]: {dir} is not for a command server on another host"),
    (_with('"--frame-addr={addr}', '"--tls-cert={cert}", "--frame-addr={addr}'),
     "servers[0]: {cert} is not for a command server on another host"),
    (_with("", "", 'cwd = "."\n'), "servers[0]: cwd is not for a command server on another host"),
    (_with("", "", '[servers.files]\n"my.conf" = "no-such.conf.in"\n'),
     "servers[0]: files is not for a command server on another host"),
])
def test_what_a_command_on_another_host_cannot_have_is_refused(text: str, said: str) -> None:
    assert said in _refused(text)


def test_a_command_on_a_hosts_engine_is_refused() -> None:
    text = '[experiment]\nbackend = "docker"\n' + HEAD + ON_APP + 'image = "x"\n'
    assert "servers (cell 'cmd/frame'): host = 'app': a command server on another host runs there as a process " \
           '(experiment.backend = "process")' in _refused(text.replace("[hosts.app]\n", '[hosts.app]\nengine = '
                                                                      '"unix:///run/podman/podman.sock"\n'))


def test_addr_is_where_each_start_listens_and_is_reached() -> None:
    """Here: 127.0.0.1. On a host: its address, with the host's ports. In a container: 0.0.0.0 in what the server
    is given, 127.0.0.1 (its published ports) in the URLs the runner reads."""
    local = _parse(HEAD + ON_APP.replace('host = "app"\n', "").replace("/opt/nowhere-here/xferd-c", "/bin/true"))
    run = commandserver.launch(local.cells[0], {})
    port, metrics = run.ports["port"], run.ports["metrics_port"]
    assert run.argv[1:] == [f"--frame-addr=127.0.0.1:{port}", f"--metrics-addr=127.0.0.1:{metrics}"]
    assert run.addrs["frame"] == f"127.0.0.1:{port}" and run.addrs["addr"] == "127.0.0.1"
    assert run.addrs["metrics_url"] == f"http://127.0.0.1:{metrics}/metrics"
    assert run.ready.value == "^xferd-c ready "

    on_host = _parse(HEAD + ON_APP).cells[0]
    where = commandserver.Where("10.0.0.9", "10.0.0.9", {"port": 4000, "metrics_port": 4001})
    run = commandserver.launch(on_host, {}, where=where)
    assert run.argv == ["/opt/nowhere-here/xferd-c", "--frame-addr=10.0.0.9:4000", "--metrics-addr=10.0.0.9:4001"]
    assert run.addrs["frame"] == "10.0.0.9:4000" and run.addrs["metrics"] == "10.0.0.9:4001"

    text = '[experiment]\nbackend = "docker"\n[load]\ntransport = "frame"\n' + ON_APP.replace('host = "app"\n', "")
    in_image = _parse(text + 'image = "x"\n').cells[0]
    run = commandserver.launch(in_image, {})
    assert run.argv[1] == f"--frame-addr=0.0.0.0:{run.ports['port']}"
    assert run.addrs["metrics_url"] == f"http://127.0.0.1:{run.ports['metrics_port']}/metrics"

    v6 = commandserver.launch(on_host, {}, where=commandserver.Where("fd00::2", "fd00::2", {"port": 1, "metrics_port": 2}))
    assert v6.addrs["frame"] == "[fd00::2]:1" and v6.addrs["metrics_url"] == "http://[fd00::2]:2/metrics"
