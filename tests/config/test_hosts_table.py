"""[hosts.NAME] and [load] hosts (xferbench/config/hosts.py): what the file says is read into Host entries, paths
resolved as every path of an experiment is, and what cannot be run is refused when the experiment is read, one line
naming the key: an unknown key or host, a malformed value, and the combinations a load on other hosts cannot run
yet. Whether the hosts answer is tests/run/test_hosts.py's."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from xferbench import config as xe
from xferbench.config import hosts

HOSTS = '[hosts.gen1]\nssh = "root@10.77.0.2"\n[hosts.gen2]\nssh = "lab3"\nssh_config = "../build/lab/ssh_config"\n'


def _read(tmp_path: Path, text: str) -> xe.Experiment:
    folder = tmp_path / "experiments"
    folder.mkdir(exist_ok=True)
    path = folder / "e.toml"
    path.write_text(text)
    return xe.load_file(path)


def _refused(text: str) -> str:
    with pytest.raises(xe.ExperimentError) as info:
        xe.parse(tomllib.loads(text), "e.toml")
    said = str(info.value)
    assert "\n" not in said, said
    return said


def test_hosts_are_read_with_their_defaults_and_paths_against_the_file(tmp_path: Path) -> None:
    exp = _read(tmp_path, HOSTS + '[load]\nhosts = ["gen1", "gen2"]\nprocesses = 2\n[[servers]]\nserver = "xferd-go"\n')
    assert list(exp.hosts) == ["gen1", "gen2"]
    gen1, gen2 = exp.hosts["gen1"], exp.hosts["gen2"]
    assert gen1 == xe.Host("gen1", "root@10.77.0.2", None, str(xe.ROOT / ".venv" / "bin" / "python"), str(xe.ROOT))
    assert gen2.ssh_config == str(tmp_path / "build" / "lab" / "ssh_config")
    assert gen2.describe() == "gen2 (lab3)"
    cell = exp.cells[0]
    assert cell.load.hosts == ("gen1", "gen2") and cell.load.processes == 2 and exp.load_hosts == ("gen1", "gen2")
    assert cell.config()["load"]["hosts"] == ("gen1", "gen2")
    # python and root are the host's own paths: never resolved here
    exp = _read(tmp_path, '[hosts.a]\nssh = "a"\npython = "venv/bin/python"\nroot = "/srv/xb/"\n'
                '[[servers]]\nserver = "xferd-go"\n')
    assert exp.hosts["a"].python == "venv/bin/python" and exp.hosts["a"].root == "/srv/xb"
    assert exp.load_hosts == () and exp.cells[0].load.hosts == ()  # declared, not used: checked, nothing runs there


def test_a_group_axis_of_hosts_and_a_comma_string_for_several() -> None:
    exp = xe.parse(tomllib.loads(HOSTS + '[[servers]]\nserver = "xferd-go"\n[servers.load]\n'
                                 'hosts = ["gen1", "gen1,gen2"]\n'), "e.toml")
    assert [c.load.hosts for c in exp.cells] == [("gen1",), ("gen1", "gen2")]
    assert [c.name for c in exp.cells] == ["go/grpc/hosts=gen1", "go/grpc/hosts=gen1,gen2"]


@pytest.mark.parametrize(("text", "said"), [
    ('[hosts.gen1]\nssh = "a"\nsshconfig = "x"\n', "e.toml: hosts.gen1.sshconfig: unknown key; allowed: ssh, "
     "ssh_config, python, root"),
    ("[hosts.gen1]\nuser = \"root\"\n", "e.toml: hosts.gen1.user: unknown key; allowed: ssh, ssh_config, python, root"),
    ("[hosts.gen1]\npython = \"/usr/bin/python3\"\n", "e.toml: hosts.gen1.ssh: required: user@address or an ssh alias"),
    ('[hosts.gen1]\nssh = "-oProxyCommand=x"\n', "e.toml: hosts.gen1.ssh = '-oProxyCommand=x': expected user@address "
     "or an ssh alias, one word not starting with '-'"),
    ('[hosts.gen1]\nssh = "a"\nroot = "srv/xb"\n', "e.toml: hosts.gen1.root = 'srv/xb': expected the absolute path"),
    ('[hosts.gen1]\nssh = "a"\npython = ""\n', "e.toml: hosts.gen1.python = '': expected the path of the Python"),
    ('[hosts.gen1]\nssh = "a"\nssh_config = 3\n', "e.toml: hosts.gen1.ssh_config = 3: expected the path of an ssh"),
    ('hosts = "gen1"\n', "e.toml: hosts: expected a table"),
    ('[hosts]\ngen1 = "root@x"\n', "e.toml: hosts.gen1: expected a table"),
    ('[hosts."gen 1"]\nssh = "a"\n', "e.toml: hosts.gen 1: a host's name is letters, digits"),
])
def test_a_malformed_host_is_refused_naming_the_key(text: str, said: str) -> None:
    assert _refused(text + '[[servers]]\nserver = "xferd-go"\n').startswith(said)


def test_an_unknown_host_is_refused_naming_where_it_was_named() -> None:
    assert _refused(HOSTS + '[load]\nhosts = ["gen1", "gen3"]\n[[servers]]\nserver = "xferd-go"\n') == (
        "e.toml: load.hosts = ['gen1', 'gen3']: no [hosts.gen3] in this experiment (declared: gen1, gen2)")
    assert _refused('[load]\nhosts = ["gen1"]\n[[servers]]\nserver = "xferd-go"\n') == (
        "e.toml: load.hosts = ['gen1']: no [hosts.gen1] in this experiment (declared: none)")
    assert _refused(HOSTS + '[[servers]]\nserver = "xferd-c"\n[servers.load]\nhosts = "gen9"\n') == (
        "e.toml: servers (cell 'c/frame'): load.hosts = ['gen9']: no [hosts.gen9] in this experiment "
        "(declared: gen1, gen2)")
    assert _refused(HOSTS + '[load]\nhosts = ["gen1", "gen1"]\n[[servers]]\nserver = "xferd-go"\n').startswith(
        "e.toml: load.hosts = ['gen1', 'gen1']: a host named twice")
    assert _refused(HOSTS + '[load]\nhosts = [1]\n[[servers]]\nserver = "xferd-go"\n').startswith(
        "e.toml: load.hosts = [1]: expected a list of [hosts] names")


@pytest.mark.parametrize(("text", "said"), [
    ('[load]\nhosts = ["gen1"]\ndriver = "xferload"\ntransport = "frame"\nmix = "echo:1"\nspawn_rate = 8\n'
     '[[servers]]\nserver = "xferd-go"\n',
     "e.toml: servers[0]: load.driver = \"xferload\": load.hosts = ['gen1']: xferload runs on this machine only; "
     'use driver = "locust"'),
    ('[network]\nlatency = "20ms"\n[load]\nhosts = ["gen1"]\n[[servers]]\nserver = "xferd-go"\n',
     "e.toml: servers (cell 'go/grpc'): load.hosts = ['gen1']: [network]'s proxy runs on this machine"),
    ('[experiment]\nbackend = "docker"\n[load]\nhosts = ["gen1"]\n[[servers]]\nserver = "xferd-go"\n',
     "e.toml: servers (cell 'go/grpc'): load.hosts = ['gen1']: servers in containers"),
    ('[load]\nhosts = ["gen1"]\n[[servers]]\nserver = "command"\ncommand = ["/bin/true", "{port}"]\n',
     "e.toml: servers (cell 'cmd/grpc'): load.hosts = ['gen1']: a command server listens where its command says"),
    ('[load]\nhosts = ["gen1"]\ncall = "xfer.v1.FileTransfer/Echo"\ndata = "@req.json"\n'
     '[[servers]]\nserver = "xferd-go"\n', "load.data = '@FILE' is a file of this machine"),
])
def test_what_a_load_on_other_hosts_cannot_run_yet_is_refused(text: str, said: str, tmp_path: Path) -> None:
    (tmp_path / "req.json").write_text("{}")
    doc: dict[str, Any] = tomllib.loads(HOSTS + text)
    with pytest.raises(xe.ExperimentError) as info:
        xe.parse(doc, "e.toml", base_dir=tmp_path)
    assert said in str(info.value), str(info.value)


def test_a_locustfile_on_other_hosts_is_refused(tmp_path: Path) -> None:
    users = tmp_path / "users.py"
    users.write_text("from locust import User\n\n\nclass Idle(User):\n    pass\n")
    doc = tomllib.loads(HOSTS + '[load]\nhosts = ["gen2"]\nlocustfile = "users.py"\n[[servers]]\nserver = "xferd-go"\n')
    with pytest.raises(xe.ExperimentError, match=r"load.hosts = \['gen2'\]: load.locustfile is a file of this machine"):
        xe.parse(doc, "e.toml", base_dir=tmp_path)


def test_the_server_listens_for_other_hosts_on_the_address_given_its_metrics_on_loopback() -> None:
    exp = xe.parse(tomllib.loads(HOSTS + '[load]\nhosts = ["gen1"]\n[[servers]]\nserver = "xferd-go"\n'), "e.toml")
    argv = exp.cells[0].server_argv("10.77.0.1")
    assert argv[1:4] == ["--grpc-addr=10.77.0.1:0", "--frame-addr=10.77.0.1:0", "--metrics-addr=127.0.0.1:0"]
    assert exp.cells[0].server_argv()[1:4] == ["--grpc-addr=127.0.0.1:0", "--frame-addr=127.0.0.1:0",
                                               "--metrics-addr=127.0.0.1:0"]
    assert xe.servers.SERVERS["xferd-c"].port0_at("fd00::1") == ("--frame-addr=[fd00::1]:0", "--metrics-addr=127.0.0.1:0")
    assert hosts.DEFAULT_ROOT == str(xe.ROOT)


ENGINE_HOST = '[hosts.app]\nssh = "root@10.77.0.2"\nengine = "unix:///run//podman/../podman/podman.sock"\n'
DOCKER = '[experiment]\nbackend = "docker"\n'


def test_a_hosts_engine_is_read_as_its_socket_there() -> None:
    exp = xe.parse(tomllib.loads(DOCKER + ENGINE_HOST + '[[servers]]\nserver = "xferd-c"\nhost = "app"\n'), "e.toml")
    app = exp.hosts["app"]
    assert app.engine == "unix:///run/podman/podman.sock" and app.engine_socket == "/run/podman/podman.sock"
    assert app.to_json()["engine"] == "unix:///run/podman/podman.sock"
    assert exp.cells[0].host == "app" and exp.backend == "docker"
    assert xe.parse(tomllib.loads(HOSTS + '[[servers]]\nserver = "xferd-go"\n'), "e.toml").hosts["gen1"].engine is None
    # its container publishes its ports on the host's address: a load on other hosts reaches it
    exp = xe.parse(tomllib.loads(DOCKER + ENGINE_HOST + HOSTS + '[load]\nhosts = ["gen1"]\n'
                                 '[[servers]]\nserver = "xferd-c"\nhost = "app"\n'), "e.toml")
    assert exp.cells[0].load.hosts == ("gen1",)


@pytest.mark.parametrize(("engine", "said"), [
    ("3", "engine = 3: expected the engine's socket on that host, unix:///PATH (e.g. engine = "
          '"unix:///run/podman/podman.sock")'),
    ('""', "engine = '': expected the engine's socket on that host, unix:///PATH"),
    ('"tcp://10.77.0.2:2375"', "engine = 'tcp://10.77.0.2:2375': an engine's TCP port is not used: its API is root "
                                "on that host, and a plain port hands it to anyone who reaches it"),
    ('"https://10.77.0.2:2376"', "engine = 'https://10.77.0.2:2376': an engine's TCP port is not used"),
    ('"ssh://root@10.77.0.2"', "engine = 'ssh://root@10.77.0.2': the Docker SDK's ssh:// runs `docker system "
                               "dial-stdio` on the host, which Podman lacks"),
    ('"npipe:////./pipe/docker_engine"', "engine = 'npipe:////./pipe/docker_engine': expected unix:///PATH, the "
                                          "engine's socket on that host"),
    ('"/run/podman/podman.sock"', "engine = '/run/podman/podman.sock': expected unix:///PATH"),
    ('"unix://run/podman.sock"', "engine = 'unix://run/podman.sock': expected an absolute path after unix:// "
                                 "(three slashes"),
    ('"unix:///run/my podman.sock"', "engine = 'unix:///run/my podman.sock': a socket path without spaces or ':'"),
    ('"unix:///run/a:b.sock"', "engine = 'unix:///run/a:b.sock': a socket path without spaces or ':' (ssh -L "
                               "LOCAL:REMOTE takes it as it is)"),
])
def test_a_malformed_engine_is_refused_naming_the_key(engine: str, said: str) -> None:
    got = _refused(f'[hosts.app]\nssh = "a"\nengine = {engine}\n[[servers]]\nserver = "xferd-go"\n')
    assert got.startswith(f"e.toml: hosts.app.{said}"), got


@pytest.mark.parametrize(("text", "said"), [
    ('[hosts.app]\nssh = "a"\n[[servers]]\nserver = "xferd-c"\nhost = "app"\n',
     "e.toml: servers (cell 'c/frame'): host = 'app': a server in a container (experiment.backend = \"docker\") on "
     "another host runs on that host's engine, and [hosts.app] names none (e.g. engine = "
     '"unix:///run/podman/podman.sock", its socket there)'),
    (ENGINE_HOST + '[load]\nhosts = ["app"]\n[[servers]]\nserver = "xferd-go"\n',
     "e.toml: servers (cell 'go/grpc'): load.hosts = ['app']: servers in containers (experiment.backend = "
     '"docker") on this machine publish their ports on 127.0.0.1, out of other hosts\' reach'),
])
def test_what_a_container_on_another_host_cannot_run_with_is_refused(text: str, said: str) -> None:
    assert _refused(DOCKER + text).startswith(said)


def test_backend_docker_on_the_command_line_needs_the_servers_hosts_engine(tmp_path: Path) -> None:
    """`xferbench run --backend docker` over an experiment written for processes: a server host without an engine is
    refused as the file would be, before anything starts."""
    path = tmp_path / "e.toml"
    path.write_text('[hosts.app]\nssh = "root@10.77.0.2"\n[[servers]]\nserver = "xferd-c"\nhost = "app"\n')
    r = subprocess.run([sys.executable, "-m", "xferbench", "run", str(path), "--backend", "docker",
                        "--out", str(tmp_path / "run")], cwd=xe.ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "error: --backend docker: cell 'c/frame' runs on app, and [hosts.app] names no engine for its container "
        '(engine = "unix:///PATH", its socket there)'), r.stderr
    assert not (tmp_path / "run").exists()
