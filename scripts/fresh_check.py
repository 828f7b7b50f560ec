"""`make fresh-check`: the newcomer's path, proved in a pristine container.

A container from the project's debootstrap base (Debian bookworm minbase: no compiler, no Go, no Python
packages, no Prometheus) receives the checkout as a clone would hold it (the files git tracks, plus new files it
does not ignore) and runs `scripts/bootstrap.sh`, `make build` and then a suite:

- `fast` (`make fresh-check`, in `make test-slow`): `make test`'s fast suite, every phase of scripts/test.sh
  (what `make test` runs after `make containers`, which needs an engine inside the container), less the tests
  that need what an unprivileged container cannot have (NOT_IN_A_CONTAINER below, each with its reason: a container
  engine, network namespaces, a cgroup of its own, perf, ptrace, a git checkout);
- `smoke` (FRESH_SUITE=smoke, a quick look): `make demo` and the unit tests of the generated code, the vectors,
  the statistics and the experiment files.

An install step that only a developer's machine has fails here, before a newcomer meets it.

What the container borrows from the host, and why:
- the host's CA bundle (read-only, as SSL_CERT_FILE and PIP_CERT): the machine may reach the package
  registries only through a proxy that presents its own certificate;
- the host's network (loopback and the registries);
- download caches in ~/.cache/xferbench/fresh-check/ (apt's .deb files, pip's wheels, Go's module and build
  caches), outside the checkout so that every clone on the machine shares them: a second check does not fetch
  the same packages again, though it still installs them all from scratch.
Nothing else: the Go toolchain comes from the Go module proxy as the bootstrap fetches it on any machine whose
Go is too old, and is fetched afresh by every check.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import docker
import docker.errors

from xferbench.run.containers import LABEL, base, engine

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xferbench" / "fresh-check"
LOG = ROOT / "build" / "fresh-check.log"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
TIMEOUT_S = 60 * 60
# Inside the container, as a newcomer types it. Each step is timed; `set -e` stops at the first failure.
PREAMBLE = r"""
set -euo pipefail
step() { printf '\n== fresh-check: %s\n' "$*"; }
timed() { local t0=$SECONDS; "$@"; printf 'fresh-check: %s took %ss\n' "$*" $((SECONDS - t0)); }
cd /src
if command -v go >/dev/null; then echo "fresh-check: a Go toolchain is already here: $(command -v go)"; exit 1; fi
step "apt-get install make (the README's first step)"
timed bash -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null"
step "make setup: scripts/bootstrap.sh (apt, Go from the module proxy, venv, Go modules, toxiproxy, ghz)"
timed make setup
step "make build"
timed make build
"""
SUITES = {
    "fast": r"""
step "make test's fast suite (scripts/test.sh fast)"
timed bash scripts/test.sh fast
step "passed"
""",
    "smoke": r"""
step "smoke: make demo"
timed make demo DEMO_SECONDS=5
step "smoke: unit tests (generated code, vectors, statistics, experiment files)"
timed .venv/bin/python -m pytest -q -p no:cacheprovider tests/proto/test_generated_sync.py tests/py_client/test_vectors.py \
  tests/analysis/test_stats.py tests/config/test_schema.py
step "passed"
""",
}
# What an unprivileged container cannot have, left out of the fast suite inside it, each with the reason: files
# that need it throughout, and single tests of files whose other tests run.
ENGINE = "a container engine of its own (Podman does not nest here)"
NET_ADMIN = "CAP_NET_ADMIN and CAP_SYS_ADMIN for a lab of network namespaces"
CGROUP = "a cgroup of its own per server (/sys/fs/cgroup is read-only in here: the /proc fallback's 10 ms ticks run)"
PERF = "perf_event_open (not permitted without CAP_PERFMON)"
PTRACE = "reading /proc/PID/maps of a worker of another user (nginx's www-data), which needs CAP_SYS_PTRACE"
GIT = "a git checkout (the tar holds the files, not the repository) for the bench record's commit"
PID1 = "a machine whose init adopts orphans (in here the check's own shell is PID 1)"
NOT_IN_A_CONTAINER = {
    **{f"tests/run/containers/test_{name}.py": ENGINE
       for name in ("backend", "cleanup", "command_container", "engine", "engine_stats", "images", "orphans")},
    "tests/deploy/test_compose_stack.py": ENGINE,
    "tests/lab": NET_ADMIN,
    "tests/run/test_hosts.py": NET_ADMIN,
    "tests/run/test_remote_server.py": NET_ADMIN,
    "tests/run/test_remote_failures.py": NET_ADMIN,
    "tests/run/test_host_figures.py": NET_ADMIN,
    "tests/run/containers/test_remote_engine.py": NET_ADMIN,
    "tests/measure/test_process_tree.py": CGROUP,
    "tests/run/test_until_ci_summary.py": CGROUP,
    # its A/A floor on CPU per request: the /proc fallback's 10 ms ticks widened it to ±47% once (its bound is ±40%)
    "tests/run/test_fidelity.py::test_aa_calls_no_difference_within_a_bounded_floor": CGROUP,
    "tests/thirdparty/test_memcached.py": CGROUP,
    "tests/run/test_command_server.py::test_xferd_go_as_a_command_gets_proc_and_its_own_figures": CGROUP,
    "tests/measure/test_command_profile.py": PERF,
    "tests/measure/test_profile.py": PERF,
    "tests/config/test_command_files.py::test_nginx_from_the_shipped_template_is_measured_whole": PTRACE,
    "tests/tools/test_bench_smoke.py::test_smoke_appends_one_whole_record": GIT,
    "tests/tools/test_bench_quiet.py::test_a_process_outside_the_tree_is_seen_as_others": PID1,
}


def pytest_addopts() -> str:
    """--ignore for a file or folder, --deselect for one test."""
    return " ".join(f"--deselect={p}" if "::" in p else f"--ignore={p}" for p in NOT_IN_A_CONTAINER)


def source_tar() -> bytes:
    """The checkout as a clone would hold it, under src/: tracked files and untracked files git does not
    ignore (so a new file a commit is about to add counts), without build/ and .venv/ (ignored)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in sorted(n for n in names if n):
            path = ROOT / name
            if path.is_file() or path.is_symlink():  # a file deleted in the working tree is not sent
                tar.add(path, arcname=f"src/{name}", recursive=False)
    return buf.getvalue()


def environment() -> dict[str, str]:
    return {
        # build/go: the toolchain the set-up fetches, first on PATH as the Makefile puts it for every make target
        "PATH": "/src/build/go/bin:/root/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTEST_ADDOPTS": pytest_addopts(),
        "SSL_CERT_FILE": "/etc/xferbench-host-ca.crt",
        "PIP_CERT": "/etc/xferbench-host-ca.crt",
        "GOPROXY": os.environ.get("GOPROXY", "https://proxy.golang.org,direct"),
        "DEBIAN_FRONTEND": "noninteractive",
        "PYTHONUNBUFFERED": "1",
        "CI": "true",
    }


def volumes() -> dict[str, dict[str, str]]:
    caches = {"apt-archives": "/var/cache/apt/archives", "pip": "/root/.cache/pip", "go-mod": "/root/go/pkg/mod",
              "go-build": "/root/.cache/go-build"}
    (CACHE / "apt-archives" / "partial").mkdir(parents=True, exist_ok=True)
    mounts = {str(HOST_CA.resolve()): {"bind": "/etc/xferbench-host-ca.crt", "mode": "ro"}}
    for name, inside in caches.items():
        (CACHE / name).mkdir(parents=True, exist_ok=True)
        mounts[str(CACHE / name)] = {"bind": inside, "mode": "rw"}
    return mounts


def run(client: docker.DockerClient, image: str, suite: str, timeout_s: float) -> int:
    # Debian's docker-clean apt hook would delete the cached .debs after every install: off in here.
    script = "rm -f /etc/apt/apt.conf.d/docker-clean\n" + PREAMBLE + SUITES[suite]
    container = client.containers.create(
        image, ["bash", "-c", script], network_mode="host", environment=environment(), volumes=volumes(),
        ulimits=base.ulimits(), labels={LABEL: "fresh-check"}, working_dir="/",
    )
    try:
        if not container.put_archive("/", source_tar()):
            raise RuntimeError("the engine refused the checkout's tar")
        container.start()
        deadline = time.monotonic() + timeout_s
        with open(LOG, "w") as log:
            for chunk in container.logs(stream=True, follow=True):
                text = chunk.decode(errors="replace")
                log.write(text)
                sys.stdout.write(text)
                sys.stdout.flush()
                if time.monotonic() > deadline:
                    print(f"fresh-check: over {timeout_s:.0f}s; stopping the container", file=sys.stderr)
                    container.kill()
                    break
        return int(container.wait(timeout=60)["StatusCode"])
    finally:
        container.remove(force=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds before the check is stopped")
    ap.add_argument("--suite", choices=sorted(SUITES), default="fast", help="what runs after the build")
    args = ap.parse_args()
    LOG.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        client = engine.ensure()
        image = base.ensure_base(client)
        code = run(client, image, args.suite, args.timeout)
    except (engine.EngineError, docker.errors.DockerException) as e:
        print(f"fresh-check: cannot run: {e}", file=sys.stderr)
        return 2
    verdict = "passed" if code == 0 else f"FAILED (exit {code}; the log is {LOG.relative_to(ROOT)})"
    print(f"fresh-check ({args.suite}): {verdict} in {time.monotonic() - started:.0f}s")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
