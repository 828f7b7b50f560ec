"""`xferbench stack` with the Prometheus that scripts/bootstrap.sh installs (Debian's 2.42, whose build has
only the classic web UI: `/targets` answers 404 there, `/classic/targets` works).

`up` prints links to the targets, rules and graph pages that must open on the installed version, and
`status` run right after `up` must already list the targets with their health (it waits, bounded, for the
first scrape, where it used to list none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from xferbench import stack
from xferbench.process import free_port

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"targets": "Targets", "rules": "Rules", "graph": "Prometheus"}  # each page's words in its HTML


def xferbench_stack(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xferbench", "stack", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=90, env=env)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, ""


def links(out: str) -> dict[str, str]:
    """`  targets http://...` lines of `up` and `status`."""
    found = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in PAGES and words[1].startswith("http://"):
            found[words[0]] = words[1]
    return found


StackUp = tuple[Path, str, subprocess.CompletedProcess[str]]  # its folder, its URL, what `up` printed


@pytest.fixture
def stack_up(tmp_path: Path) -> Iterator[StackUp]:
    """A local stack in tmp_path scraping only itself (every compose service dropped), every second."""
    stack.prometheus_binary()  # a missing Prometheus is a failure (scripts/bootstrap.sh installs it)
    listen = f"127.0.0.1:{free_port()}"
    drop = [f"--target={s}=" for s in stack.LOCAL_SERVICES]
    try:
        up = xferbench_stack("up", "--dir", str(tmp_path), "--listen", listen, "--scrape-interval", "1s", *drop)
        assert up.returncode == 0, up.stdout + up.stderr
        yield tmp_path, f"http://{listen}", up
    finally:
        down = xferbench_stack("down", "--dir", str(tmp_path))
        assert down.returncode == 0, down.stdout + down.stderr


def test_up_prints_ui_links_that_open_on_the_installed_version(stack_up: StackUp) -> None:
    _, url, up = stack_up
    found = links(up.stdout)
    assert sorted(found) == sorted(PAGES), up.stdout
    for page, link in found.items():
        status, body = get(link)
        assert status == 200 and PAGES[page] in body, (link, status)
    _, info = get(f"{url}/api/v1/status/buildinfo")
    if "+ds" in json.loads(info)["data"]["version"]:  # Debian's build: the classic UI only
        assert found["targets"] == f"{url}/classic/targets"
        assert get(f"{url}/targets")[0] == 404  # what the README used to link to


def test_status_right_after_up_lists_the_targets_scraped(stack_up: StackUp) -> None:
    d, url, _ = stack_up
    st = xferbench_stack("status", "--dir", str(d))
    assert st.returncode == 0, st.stdout + st.stderr
    assert links(st.stdout) == links(stack_up[2].stdout)
    (line,) = [x for x in st.stdout.splitlines() if x.startswith("  prometheus ")]  # the job's target lines
    assert line.split()[1:] == [f"{url}/metrics", "up"], st.stdout


def test_status_without_a_stack_says_so(tmp_path: Path) -> None:
    st = xferbench_stack("status", "--dir", str(tmp_path))
    assert (st.returncode, st.stdout.strip()) == (1, "stack is not up")
    env = {**os.environ, "XFERBENCH_STACK_DIR": str(tmp_path)}  # the default folder follows the variable
    assert xferbench_stack("status", env=env).stdout.strip() == "stack is not up"
    bad = xferbench_stack("status", "--wait", "soon", "--dir", str(tmp_path))
    assert bad.returncode == 2 and "want seconds, such as 15 or 15s" in bad.stderr
