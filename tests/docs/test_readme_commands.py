"""The README's shell commands, and those of the documents it sends readers to (docs/USAGE.md,
docs/EXPERIMENTS.md, deploy/README.md), do what they say: each one runs here, as written, unless it needs a
long load or Docker (each such command is listed below with the reason). Servers are started on free ports
and the documents' addresses (the servers' defaults, read from their --help) are pointed at them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.markdown import Command, shell_commands
from tests.support.server_help import help_flags, help_text
from tests.support.servers import ROOT, RunningServer, running_server
from xferbench.run.process import free_port

README = ROOT / "README.md"
DOCS = [README, ROOT / "docs" / "USAGE.md", ROOT / "docs" / "EXPERIMENTS.md", ROOT / "deploy" / "README.md"]
VENV_BIN = Path(sys.executable).parent
QUICK_TIMEOUT_S = 60.0
DEMO_TIMEOUT_S = 600.0  # make demo builds first (a no-op once built), then about 20 s
# Commands not run here, by pattern, with the reason.
NOT_RUN = {
    r"^make run$": "a 3-minute experiment: tests/run/test_quick_e2e.py runs a short one",
    r"^make test$": "the whole suite, of which this test is a part",
    r"^xferbench run experiments/soak\.toml$": "40 minutes: tests/measure/test_soak.py runs short soaks, and a "
    "3-minute one in make test-slow",
    r"^xferbench run experiments/profile-demo\.toml$": "3 minutes: tests/measure/test_profile.py runs profiled "
    "cells of both servers",
    r"^xferbench run experiments/netrpc-stress\.toml$": "21 minutes: tests/run/test_stress_matrix.py runs a "
    "2 x 2 matrix",
    r"^xferbench run experiments/quick\.toml --prometheus ": "an experiment: tests/deploy/test_runner_prometheus.py "
    "measures a cell through Prometheus",
    r"^make containers$": "in make test (it imports a debootstrap base image); tests/run/containers/ use what it prepares",
    r"^xferbench run experiments/containers\.toml$": "about 12 minutes on the container engine: tests/run/containers/ "
    "run the container backend's cells",
    r"^xferbench run experiments/quick\.toml --backend docker$": "3 minutes on the container engine: "
    "tests/run/containers/ run the container backend's cells",
    r"^(make build && )?xferbench images build\b": "minutes of image builds: tests/run/containers/test_images.py and the "
    "container tests build the same images through xferbench.run.containers.images",
    r"^docker-compose -p xferbench -f deploy/docker-compose\.yml ": "the stack in containers: "
    "tests/deploy/test_compose_stack.py brings it up with these files, loads it and takes it down",
    r"^make lab-up && \.venv/bin/xferbench run experiments/lab\.toml && make lab-down$": "the lab's default hosts: "
    "tests/run/test_remote_server.py runs the same shape (xferd-c on one lab host, Locust workers on another) in a "
    "lab of its own, and tests/lab/test_lab.py brings labs up and down",
    r"^make lab-(up|down)$": "the lab's default hosts: tests/lab/test_lab.py brings labs of their own up and down",
    r"^\.venv/bin/python scripts/studies/lab_master\.py ": "a study of minutes on the default lab, whose figures "
    "docs/EXPERIMENTS.md quotes; its runs are `xferbench run`s of the shape tests/run/test_host_figures.py runs",
}
QUICK = (r"^\.venv/bin/xferbench (--help|list)$", r"^build/bin/xferd-(go|c) (--help|--version)$",
         r"^\.venv/bin/python -m loadgen$")
SERVER = r"^(\w+=\S+ )*build/bin/xferd-(go|c) (?!--help$|--version$)"
CLIENT = (r"^head -c \d+ /dev/urandom > \S+$", r"^\.venv/bin/python -m py_client ")
STACK = r"^xferbench stack (up|status|down)\b"
DEMO = r"^make demo$"
RUN = (*QUICK, SERVER, *CLIENT, STACK, DEMO)


def readme_commands() -> list[Command]:
    return [c for doc in DOCS for c in shell_commands(doc)]


def where(c: Command) -> str:
    return f"{c.doc.relative_to(ROOT)}:{c.line}"


def matching(pattern: str | tuple[str, ...]) -> list[Command]:
    patterns = (pattern,) if isinstance(pattern, str) else pattern
    return [c for c in readme_commands() if any(re.search(p, c.text) for p in patterns)]


def run(argv: list[str], timeout: float = QUICK_TIMEOUT_S, **kw) -> subprocess.CompletedProcess[str]:
    if argv[0] in ("xferbench", "locust"):
        argv = [str(VENV_BIN / argv[0]), *argv[1:]]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=kw.pop("cwd", ROOT), **kw)


def test_every_readme_command_is_run_or_excused() -> None:
    commands = readme_commands()
    assert len(commands) > 10, "the README's sh blocks were not found"
    unclassified = [f"{where(c)}: {c.text}" for c in commands
                    if not any(re.search(p, c.text) for p in (*RUN, *NOT_RUN))]
    assert not unclassified, "README commands this test neither runs nor excuses:\n" + "\n".join(unclassified)


@pytest.mark.parametrize("command", matching(QUICK), ids=lambda c: c.text)
def test_quick_command_runs(command: Command) -> None:
    r = run(command.argv)
    assert r.returncode == 0, f"{where(command)}: {command.text}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
    assert r.stdout.strip(), f"{command.text} printed nothing"


def size_bytes(text: str) -> str:
    """A flag value as the ready line writes it: sizes in bytes."""
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB)", text)
    return str(int(m[1]) << {"KiB": 10, "MiB": 20, "GiB": 30}[m[2]]) if m else text


@pytest.mark.parametrize("command", matching(SERVER), ids=lambda c: c.text)
def test_server_command_starts_with_what_it_asks_for(command: Command) -> None:
    argv = command.argv
    env = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-") and "/" not in a.split("=")[0])
    argv = argv[len(env):]
    name, args = Path(argv[0]).name, argv[1:]
    with running_server(name, args, env=env) as s:  # on free ports: the README's defaults may be taken
        for flag, value in zip(args[::2], args[1::2], strict=True):
            key = flag.removeprefix("--").replace("-", "_")
            assert s.ready[key] == size_bytes(value), f"{command.text}: ready line has {key}={s.ready[key]}"
        for k, v in env.items():
            assert f"{k}={v}" in s.ready.get("env", ""), f"{k} is not echoed on the ready line: {s.ready}"


def default_address(server: str, flag: str) -> str:
    """A listener's default address, as the server's --help says."""
    meaning = help_flags(help_text(server))[flag].meaning
    m = re.search(r"\(default (\S+)\)", meaning)
    assert m, f"{server} --{flag} shows no default: {meaning!r}"
    return m[1]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, RunningServer]]:
    with running_server("xferd-go") as go, running_server("xferd-c") as c:
        yield {"xferd-go": go, "xferd-c": c}


def test_client_commands_work_as_written(servers: dict[str, RunningServer], tmp_path: Path) -> None:
    """The py_client block, in order, in a fresh folder: the file it makes, uploads, stats, downloads."""
    moved = {default_address(name, f"{t}-addr"): s.addr(t)
             for name, s in servers.items() for t in s.kind.transports}
    commands = matching(CLIENT)
    assert commands and any("upload" in c.text for c in commands)
    for c in commands:
        text = c.text
        for default, bound in moved.items():
            text = text.replace(f"//{default}", f"//{bound}")
        assert text != c.text or "py_client" not in text, f"{c.text}: an address no server listens on by default"
        text = re.sub(r"(^|\s)\.venv/", lambda m: f"{m[1]}{ROOT}/.venv/", text)  # run from a fresh folder
        r = run(["bash", "-c", text], cwd=tmp_path)
        assert r.returncode == 0, f"{where(c)}: {c.text}\n{r.stdout}{r.stderr}"
        if "py_client" in text:
            result = json.loads(r.stdout.splitlines()[-1])
            assert result["ok"] is True, f"{where(c)}: {result}"
    assert (tmp_path / "b.bin").stat().st_size == 10485760


# In make test-slow (20 s, one stack per `up` line); make test keeps up/status/down in tests/deploy/test_static.py
# and tests/tools/test_stack.py.
@pytest.mark.slow
def test_stack_commands_work_as_written(tmp_path: Path) -> None:
    """Each `stack up` line, then `status` and `down`, on a private folder and a free port."""
    private = ["--dir", str(tmp_path)]
    listen = ["--listen", f"127.0.0.1:{free_port()}"]
    ups = [c for c in matching(STACK) if c.argv[2] == "up"]
    rest = {c.argv[2]: c for c in matching(STACK) if c.argv[2] != "up"}
    assert ups and set(rest) == {"status", "down"}
    for up in ups:
        try:
            r = run([*up.argv, *private, *listen], timeout=120)
            assert r.returncode == 0, f"{where(up)}: {up.text}\n{r.stdout}{r.stderr}"
            r = run([*rest["status"].argv, *private])
            assert r.returncode == 0 and "127.0.0.1" in r.stdout, f"{rest['status'].text}\n{r.stdout}{r.stderr}"
        finally:
            r = run([*rest["down"].argv, *private], timeout=120)
        assert r.returncode == 0, f"{rest['down'].text}\n{r.stdout}{r.stderr}"


def test_make_demo_runs() -> None:
    """`make demo` as written, its Locust step cut from 10 s to 3 (DEMO_SECONDS, scripts/demo.sh's own knob):
    every step still runs and is checked; only the load is shorter."""
    [demo] = matching(DEMO)
    r = run(demo.argv, timeout=DEMO_TIMEOUT_S, env={**os.environ, "DEMO_SECONDS": "3"})
    assert r.returncode == 0, f"{where(demo)}: {demo.text}\n{r.stdout[-4000:]}{r.stderr[-4000:]}"
    assert "== Locust: 3 s of " in r.stdout, r.stdout[-4000:]  # the knob reached the script
    for step in ("xferd-go ready", "xferd-c ready", "xfer-check PASS: failures==0", "xfer_requests_total"):
        assert step in r.stdout + r.stderr, f"make demo did not show {step!r}"
