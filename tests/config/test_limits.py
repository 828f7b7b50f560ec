"""[experiment] backend and [servers.limits]: containers' limits parse into cells (lists are axes), and
every mistake is refused naming the field and what it accepts."""

from __future__ import annotations

import tomllib

import pytest

from xferbench import config as xe
from xferbench.run.containers import backend


def parse(text: str) -> xe.Experiment:
    return xe.parse(tomllib.loads(text), "t.toml", "t")


def refused(text: str, needles: list[str]) -> None:
    with pytest.raises(xe.ExperimentError) as ei:
        parse(text)
    for n in needles:
        assert n in str(ei.value), str(ei.value)


DOCKER = '[experiment]\nbackend = "docker"\n[load]\nrate = "10"\n'


def test_limits_become_cells_and_container_arguments() -> None:
    exp = parse(DOCKER + '[[servers]]\nserver = "xferd-go"\n[servers.env]\nGOMAXPROCS = ["", "1"]\n'
                '[servers.limits]\ncpus = [0.5, 1.5]\nmemory = "256MiB"\n')
    assert exp.backend == "docker"
    assert [c.name for c in exp.cells] == [
        "go/grpc/GOMAXPROCS=default/cpus=0.5", "go/grpc/GOMAXPROCS=default/cpus=1.5",
        "go/grpc/GOMAXPROCS=1/cpus=0.5", "go/grpc/GOMAXPROCS=1/cpus=1.5",
    ]
    cell = exp.cells[3]
    assert cell.limits == xe.Limits(1.5, 256 << 20)
    assert cell.config()["limits"] == {"cpus": 1.5, "memory_bytes": 256 << 20}
    kw = backend.limit_kwargs(cell.limits, (0,))
    assert kw["nano_cpus"] == 1_500_000_000 and kw["mem_limit"] == kw["memswap_limit"] == 256 << 20
    assert kw["cpuset_cpus"] == "0" and {u["Name"] for u in kw["ulimits"]} == {"nofile", "nproc"}
    # Inside the container: listeners on 0.0.0.0 at the image's ports; only the cell's own environment.
    assert backend.container_argv(cell)[:3] == [
        "--grpc-addr=0.0.0.0:50051", "--frame-addr=0.0.0.0:7070", "--metrics-addr=0.0.0.0:9101"]
    assert backend.container_env(cell) == {"GOMAXPROCS": "1"} and backend.container_env(exp.cells[0]) == {}


def test_image_is_per_group_then_environment_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = parse(DOCKER + '[[servers]]\nserver = "xferd-c"\nimage = "localhost/x/c:1"\n[[servers]]\nserver = "xferd-go"\n')
    assert backend.image_for(exp.cells[0]) == "localhost/x/c:1"
    assert backend.image_for(exp.cells[1]) == "localhost/xferbench/xferd-go:dev"
    monkeypatch.setenv("XFERBENCH_IMAGE_XFERD_GO", "localhost/x/go:2")
    assert backend.image_for(exp.cells[1]) == "localhost/x/go:2"


@pytest.mark.parametrize(("text", "needles"), [
    ('[experiment]\nbackend = "vm"\n[[servers]]\nserver = "xferd-go"\n', ["experiment.backend", "process | docker"]),
    ('[[servers]]\nserver = "xferd-go"\n[servers.limits]\nmemory = "64MiB"\n', ["servers.limits", 'backend = "docker"']),
    (DOCKER + '[[servers]]\nserver = "xferd-go"\n[servers.limits]\nmemory = "1MiB"\n',
     ["servers[0].limits.memory", "at least 6MiB"]),
    (DOCKER + '[[servers]]\nserver = "xferd-go"\n[servers.limits]\ncpus = 0\n', ["servers[0].limits.cpus", "0 < cpus"]),
    (DOCKER + '[[servers]]\nserver = "xferd-go"\n[servers.limits]\ncpus = 999\n', ["servers[0].limits.cpus"]),
    (DOCKER + '[[servers]]\nserver = "xferd-go"\n[servers.limits]\nswap = 1\n', ["limits.swap", "cpus, memory"]),
    (DOCKER + '[[servers]]\nserver = "xferd-go"\nimage = 3\n', ["servers[0].image"]),
])
def test_mistakes_are_refused_by_name(text: str, needles: list[str]) -> None:
    refused(text, needles)


def test_shipped_containers_experiment_is_valid() -> None:
    exp = xe.load_file("experiments/containers.toml")
    assert exp.backend == "docker" and exp.pinning.mode == "none"
    assert {c.limits.memory for c in exp.cells if c.server == "xferd-c"} == {64 << 20}
    assert {c.limits.cpus for c in exp.cells if c.name.startswith("go-cpu")} == {0.5, 1.0, 1.5}
