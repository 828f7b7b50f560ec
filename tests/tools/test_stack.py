"""`xferbench stack` with the Prometheus that scripts/bootstrap.sh installs (Debian's 2.42, whose build has
only the classic web UI: `/targets` answers 404 there, `/classic/targets` works).

`up` prints links to the targets, rules and graph pages that must open on the installed version, and
`status` run right after `up` must already list the targets with their health (it waits, bounded, for the
first scrape, where it used to list none).

One stack serves the module: `up`, then `status` at once (before any test touches the stack), and `down` at the
end, each a real `python -m xferbench stack` process. The argument refusal and the $XFERBENCH_STACK_DIR default
are checked in-process through `cli.main`, the same parser and code the command runs."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from xferbench import cli
from xferbench.run.process import free_port
from xferbench.tools import stack

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"targets": "Targets", "rules": "Rules", "graph": "Prometheus"}  # each page's words in its HTML


def xferbench_stack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xferbench", "stack", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=90)


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


@dataclass(frozen=True)
class StackUp:
    dir: Path
    url: str
    up: subprocess.CompletedProcess[str]  # what `up` printed
    status: subprocess.CompletedProcess[str]  # what `status`, run right after `up`, printed


@pytest.fixture(scope="module")
def stack_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackUp]:
    """A local stack in its own folder scraping only itself (every compose service dropped), every second;
    `status` is run the moment `up` returns, as a user typing both would."""
    stack.prometheus_binary()  # a missing Prometheus is a failure (scripts/bootstrap.sh installs it)
    d = tmp_path_factory.mktemp("stack")
    listen = f"127.0.0.1:{free_port()}"
    drop = [f"--target={s}=" for s in stack.LOCAL_SERVICES]
    try:
        up = xferbench_stack("up", "--dir", str(d), "--listen", listen, "--scrape-interval", "1s", *drop)
        assert up.returncode == 0, up.stdout + up.stderr
        st = xferbench_stack("status", "--dir", str(d))
        yield StackUp(d, f"http://{listen}", up, st)
    finally:
        down = xferbench_stack("down", "--dir", str(d))
        assert down.returncode == 0, down.stdout + down.stderr
        assert not (d / "prometheus.pid").exists(), down.stdout


def test_up_prints_ui_links_that_open_on_the_installed_version(stack_up: StackUp) -> None:
    url, up = stack_up.url, stack_up.up
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
    st, url = stack_up.status, stack_up.url
    assert st.returncode == 0, st.stdout + st.stderr
    assert links(st.stdout) == links(stack_up.up.stdout)
    (line,) = [x for x in st.stdout.splitlines() if x.startswith("  prometheus ")]  # the job's target lines
    assert line.split()[1:] == [f"{url}/metrics", "up"], st.stdout


def test_status_finds_the_stack_through_the_variable(stack_up: StackUp, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """No --dir: the default folder is $XFERBENCH_STACK_DIR's, here the running stack's."""
    monkeypatch.setenv("XFERBENCH_STACK_DIR", str(stack_up.dir))
    assert cli.main(["stack", "status"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("prometheus pid ") and out.splitlines()[0].endswith(f" at {stack_up.url}")
    assert links(out) == links(stack_up.up.stdout), out


def test_status_without_a_stack_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    st = xferbench_stack("status", "--dir", str(tmp_path))  # the command's own exit status and output
    assert (st.returncode, st.stdout.strip()) == (1, "stack is not up")
    monkeypatch.setenv("XFERBENCH_STACK_DIR", str(tmp_path))  # the default folder follows the variable
    assert cli.main(["stack", "status"]) == 1
    assert capsys.readouterr().out.strip() == "stack is not up"
    with pytest.raises(SystemExit) as bad:
        cli.main(["stack", "status", "--wait", "soon", "--dir", str(tmp_path)])
    assert bad.value.code == 2 and "want seconds, such as 15 or 15s" in capsys.readouterr().err
