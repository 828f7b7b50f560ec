"""A server's container on another host's engine ([hosts.NAME] engine, xferbench/run/containers/remote.py), against
a lab whose hosts each run Podman's API service of their own (scripts/lab.sh up --engine: in the host's network
namespace and cpuset, with storage of its own), reached through a real ssh forward:

- a --quick run of xferd-go in a container on lab host 1's engine, limited in CPU and memory, with Locust's worker
  on lab host 2: the image was sent there (the same id as here), the load reached the container's ports on host
  1's address, its figures are its cgroup's on that engine (CPU, RSS, CFS periods, memory peak, no OOM kill); and
  nothing is left: no container on that engine, no ssh forward, no forward's socket folder;
- an image is sent only when the engine lacks its id;
- an engine that is not there is refused before any run, naming the host and the path;
- a runner stopped with SIGTERM mid-run removes its container there and closes its forward; one killed outright
  leaves its container, which the next run's preparation removes, with its socket folder;
- (the module's teardown) scripts/lab.sh down removes every engine, its containers, storage and mounts; an up
  --engine that fails halfway leaves nothing either.

The module has one lab of its own, eg<worker>a on 10.82.<100 + worker>, brought up once and always torn down. Needs
root with the capabilities of network namespaces, podman and runc, and the images of `make containers`."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from tests.support.lab import LAB, Lab, experiment, two_hosts_up
from tests.support.runs import ROOT, processes_mentioning, xferbench_run
from xferbench import config as xe
from xferbench.run.containers import LABEL, forward, remote, transfer
from xferbench.run.containers.backend import RUNNER_PID_LABEL

# Whole runs across lab hosts, as tests/run/test_remote_server.py's: in make test-slow.
pytestmark = pytest.mark.slow

MiB = 1 << 20
LOAD = 'users = 2\nrate = "20"\nmix = "upload:1,download:1,echo:2"\nsizes = "1MiB"\nchunk = "256KiB"\n'
SERVER = 'server = "xferd-go"\nhost = "app"\n[servers.limits]\ncpus = 0.2\nmemory = "128MiB"\n'


def engine_url(lab: Lab, i: int) -> str:
    """Host i's engine socket, as lab.sh up --engine lists it ("name unix://socket" lines)."""
    urls = dict(line.split() for line in (lab.dir / "engines").read_text().splitlines())
    return urls[lab.host(i)]


def engine_client(lab: Lab, i: int) -> docker.DockerClient:
    """Host i's engine, reached here directly (the lab shares this filesystem): what the test checks with."""
    return docker.DockerClient(base_url=engine_url(lab, i), version="auto", timeout=60)


def containers_on(lab: Lab, i: int) -> list[str]:
    with contextlib.closing(engine_client(lab, i)) as c:
        return [f"{x.name} ({x.status})" for x in c.containers.list(all=True)]


def forward_folders() -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"{forward.PREFIX}*"))


def docker_experiment(lab: Lab, tmp_path: Path, engine: str, load: str) -> Path:
    hosts = f'[hosts.app]\nssh = "{lab.host(1)}"\nengine = "{engine}"\n[hosts.gen]\nssh = "{lab.host(2)}"\n'
    path = experiment(lab, tmp_path, hosts, load, SERVER)
    path.write_text(path.read_text().replace("[experiment]\n", '[experiment]\nbackend = "docker"\n', 1))
    return path


def _engine_processes(lab: Lab) -> list[str]:
    """Its engines' processes: the services and their containers' conmon, which name the lab's folder."""
    return processes_mentioning(f"{lab.dir}/")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, client: docker.DockerClient, images: dict[str, str]) -> Iterator[Lab]:
    with two_hosts_up("eg", 82, tmp_path_factory, "--engine") as lab:
        assert _engine_processes(lab), "no engine runs for the lab"
        yield lab
        pids = _leave_a_container(lab, images["xferd-go"])
    # down removed the engines, whatever they ran
    assert _engine_processes(lab) == [] and not lab.dir.exists()
    assert [p for p in pids if Path(f"/proc/{p}").exists()] == [], "a container's process outlived down"
    mounts = Path("/proc/self/mounts").read_text()
    assert str(lab.dir) not in mounts, [ln for ln in mounts.splitlines() if str(lab.dir) in ln]


def _leave_a_container(lab: Lab, image: str) -> list[int]:
    """A running container on host 1's engine for down to remove (when the image is there), and its pids."""
    with contextlib.closing(engine_client(lab, 1)) as c:
        try:
            c.images.get(image)
        except docker.errors.ImageNotFound:
            return []
        ctr = c.containers.run(
            image,
            ["--grpc-addr=0.0.0.0:7000"],
            ports={"7000/tcp": (lab.addr(1), None)},
            detach=True,
            labels={LABEL: "test"},
            ulimits=_ulimits(),
        )
        ctr.reload()
        return [int(ctr.attrs["State"]["Pid"])]


def _ulimits() -> list[docker.types.Ulimit]:
    from xferbench.run.containers.base import ulimits

    return ulimits()


def test_a_quick_run_with_its_server_in_a_container_on_a_lab_hosts_engine(
    lab: Lab, tmp_path: Path, client: docker.DockerClient, images: dict[str, str]
) -> None:
    path = docker_experiment(lab, tmp_path, engine_url(lab, 1), 'hosts = ["gen"]\n' + LOAD)
    out = tmp_path / "run"
    r = xferbench_run(str(path), "--out", str(out), timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert row["status"] == "ok" and row["client_qps"] > 0, row
    # the image there is the one here
    with contextlib.closing(engine_client(lab, 1)) as there:
        assert there.images.get(images["xferd-go"]).id == client.images.get(images["xferd-go"]).id
    # published on host 1's address, where Locust's worker on host 2 (and the scraper here) reached it
    ready, ctr = row["ready"], row["container"]
    assert ready["grpc"].startswith(f"{lab.addr(1)}:") and ready["metrics"].startswith(f"{lab.addr(1)}:"), ready
    assert ready["host"] == "app" and row["load_hosts"]["gen"]["client_qps"] > 0, row["load_hosts"]
    assert ctr["host"] == "app" and ctr["engine"] == engine_url(lab, 1), ctr
    assert ctr["cpus"] == 0.2 and ctr["memory_bytes"] == 128 * MiB, ctr
    # its figures: the container's cgroup on that engine
    assert (
        row["cpu_clock"] == f"the container's cgroup on app ({lab.host(1)}), as its engine's statistics report it "
        "(nanoseconds)"
    ), row["cpu_clock"]
    assert row["server_cpu_cores"] > 0 and row["server_cpu_per_request_s"] > 0, row
    assert not row.get("bounds"), row["bounds"]  # a nanosecond clock: values, never a tick's bounds
    assert 0 < row["rss_peak_bytes"] < 128 * MiB and row["proc_threads_peak"] >= 3, row
    assert 0 < row["ctr_mem_peak_bytes"] < 128 * MiB and row["ctr_mem_usage_bytes"] > 0, row
    assert row["ctr_cpu_periods"] > 0 and row["ctr_cpu_throttled_periods"] is not None, row  # the quota enforced
    assert row["ctr_oom_kills"] == 0 and row["ctr_oom_killed"] is False and row["ctr_mem_failcnt"] == 0, row
    assert row["proc_fds_peak"] is None and row["proc_ctx_switches_per_s"] is None  # the host's /proc, not read
    # The server's host has its own figures too, read over ssh at the window's edges (its engine runs no watch).
    app = row["hosts"]["app"]
    assert app["roles"] == ["server"] and app["cpu"]["cpus"] >= 1 and app["net"]["rx_bytes"] > 0, app
    assert f"servers on app ({lab.addr(1)}: " in (out / "summary.md").read_text()
    # nothing left: no container there, no forward, no socket folder
    assert containers_on(lab, 1) == []
    assert lab.sessions_here() == [] and forward_folders() == []


def test_an_image_is_sent_only_when_the_engine_lacks_its_id(lab: Lab, client: docker.DockerClient) -> None:
    """A tiny image of this test's own (one file), so that no rebuild of the servers' images here can change it."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"hello\n"))
    mark = f"engine-test-{os.getpid()}"
    client.api.import_image_from_data(data.getvalue(), changes=[f"LABEL {LABEL}={mark}"])
    (image,) = client.images.list(filters={"label": f"{LABEL}={mark}"})
    image_id = str(image.id)
    tag = f"localhost/xferbench/engine-test:{os.getpid()}"
    assert client.images.get(image_id).tag(*tag.split(":"))
    host = xe.Host("app", lab.host(1), str(lab.dir / "ssh_config"), engine=engine_url(lab, 1))
    fwd = forward.Forward(host)
    try:
        assert fwd.client is not None
        first = transfer.ensure(client, fwd.client, tag, host.describe())
        again = transfer.ensure(client, fwd.client, tag, host.describe())
        assert first.sent and first.bytes > 0 and first.image_id == image_id, first
        assert not again.sent, again
        assert tag in fwd.client.images.get(image_id).tags
        fwd.client.images.remove(image_id, force=True)
    finally:
        fwd.close()
        client.images.remove(image_id, force=True)
    assert lab.sessions_here() == [] and forward_folders() == []


def test_an_engine_that_is_not_there_is_refused_before_any_run(lab: Lab, tmp_path: Path) -> None:
    path = docker_experiment(lab, tmp_path, "unix:///nonexistent/podman.sock", LOAD)
    out = tmp_path / "run"
    r = xferbench_run(str(path), "--out", str(out), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: backend docker: app ({lab.host(1)}): the engine at unix:///nonexistent/podman.sock: app has no "
        "/nonexistent/podman.sock (is its engine's service running?)"
    ), r.stderr
    assert not out.exists() and lab.sessions_here() == [] and forward_folders() == []


def _start_until_its_container_runs(lab: Lab, path: Path, run_dir: Path) -> subprocess.Popen[bytes]:
    runner = subprocess.Popen(
        [sys.executable, "-m", "xferbench", "run", str(path), "--out", str(run_dir)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not _runners_container(lab, runner.pid):
        if runner.poll() is not None or time.monotonic() > deadline:
            runner.kill()
            runner.wait()
            pytest.fail(f"no container of the runner on the lab's engine (it exited with {runner.returncode})")
        time.sleep(0.5)
    return runner


def test_a_runner_stopped_mid_run_removes_its_container_there(lab: Lab, tmp_path: Path) -> None:
    path = docker_experiment(lab, tmp_path, engine_url(lab, 1), LOAD + "duration_s = 60\n")
    runner = _start_until_its_container_runs(lab, path, tmp_path / "run")
    try:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert _runners_container(lab, runner.pid) == [] and containers_on(lab, 1) == []
    assert lab.sessions_here() == [] and forward_folders() == []


def test_a_runner_killed_outright_leaves_a_container_the_next_run_removes(
    lab: Lab, tmp_path: Path, client: docker.DockerClient
) -> None:
    path = docker_experiment(lab, tmp_path, engine_url(lab, 1), LOAD + "duration_s = 60\n")
    runner = _start_until_its_container_runs(lab, path, tmp_path / "run")
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=30)
    # its ssh sessions died with it (the parent-death signal): no forward; its container and socket folder stay
    deadline = time.monotonic() + 20
    while lab.sessions_here():
        assert time.monotonic() < deadline, f"left after 20 s: {lab.sessions_here()}"
        time.sleep(0.2)
    assert _runners_container(lab, runner.pid)
    assert [d for d in forward_folders() if d.name.startswith(f"{forward.PREFIX}{runner.pid}-")]
    remote.prepare(xe.load_file(path), client)  # what the next run does before its first cell
    assert containers_on(lab, 1) == [] and forward_folders() == []
    assert lab.sessions_here() == []


def _runners_container(lab: Lab, pid: int) -> list[str]:
    with contextlib.closing(engine_client(lab, 1)) as c:
        return [str(x.name) for x in c.containers.list(all=True, filters={"label": f"{RUNNER_PID_LABEL}={pid}"})]


def test_an_up_with_engines_that_fails_halfway_leaves_nothing(tmp_path: Path) -> None:
    """An engine started, then up fails: what it undoes includes the engine, its storage and its run folder."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    name, folder = f"eg{worker}b", tmp_path / "lab"
    r = subprocess.run(
        [
            "bash",
            str(LAB),
            "up",
            "--name",
            name,
            "--net",
            f"10.82.{200 + worker % 50}",
            "--hosts",
            "2",
            "--dir",
            str(folder),
            "--engine",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XFERBENCH_LAB_FAIL_AFTER": "engine1"},
    )
    assert r.returncode == 1 and "failing after engine1" in r.stderr, r.stdout + r.stderr
    assert processes_mentioning(f"{folder}/") == [] and processes_mentioning(f"/run/xblab-{name}/") == []
    assert not folder.exists() and not Path(f"/run/xblab-{name}").exists()
    assert f"/run/xblab-{name}/" not in Path("/proc/self/mounts").read_text()
