"""Commands on another host ([hosts.NAME]) with the user's own `ssh`: `ssh -o BatchMode=yes [-F ssh_config] TARGET --
'argv…'`, the remote argv quoted with shlex.join (ssh hands the remote shell one command line).

`run` waits for a command with a deadline and captures its output; `session` starts one whose stdin and stdout
stay open (the host check's exchanges, a Locust worker); `kill_marked` is the backstop that ends, on the host,
every process whose command line carries a marker. A failure raises RemoteError naming the host and what ssh
itself said last ("gen2 (root@10.77.0.3): ssh: connect to host 10.77.0.3 port 22: No route to host"): ssh
exits with 255 for its own errors, with the remote command's status otherwise.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from xferbench.config import Host

SSH = "ssh"
SSH_FAILED = 255  # ssh's own status: connection, authentication, configuration
CONNECT_TIMEOUT_S = 10
RUN_TIMEOUT_S = 60.0
# Options of every connection: never a prompt (a password or an unknown host key is a failure, said at once), a
# bounded connect, and a session that a vanished host ends within about 15 s rather than hanging.
OPTIONS = ("-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", "ServerAliveInterval=5",
           "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR")


class RemoteError(RuntimeError):
    """A command on a host that could not run or failed; the message starts with the host's name and target."""


def argv(host: Host, remote: Sequence[str]) -> list[str]:
    """The local command line that runs `remote` on `host`."""
    config = ["-F", host.ssh_config] if host.ssh_config else []
    return [SSH, *OPTIONS, *config, host.ssh, "--", shlex.join(remote)]


def _config_missing(host: Host) -> RemoteError | None:
    if host.ssh_config and not Path(host.ssh_config).is_file():
        return RemoteError(f"{host.describe()}: ssh_config {host.ssh_config}: no such file")
    return None


def last_line(text: str) -> str:
    """The last line that says something: what ssh (or the remote command) said last."""
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def failure(host: Host, status: int | None, stderr: str, what: str = "") -> RemoteError:
    """The error of a command that ended with `status`: ssh's own last line when ssh failed, else the command's."""
    said = last_line(stderr)
    if status == SSH_FAILED:
        return RemoteError(f"{host.describe()}: {said or 'ssh failed (exit status 255)'}")
    doing = f"{what}: " if what else ""
    return RemoteError(f"{host.describe()}: {doing}exit status {status}" + (f": {said}" if said else ""))


def run(host: Host, remote: Sequence[str], *, timeout_s: float = RUN_TIMEOUT_S, input_text: str | None = None,
        check: bool = True, what: str = "") -> subprocess.CompletedProcess[str]:
    """Runs `remote` on the host and waits; RemoteError when ssh fails, the deadline passes or (with `check`) the
    command exits non-zero. `what` names the command in that error."""
    if (missing := _config_missing(host)) is not None:
        raise missing
    try:
        r = subprocess.run(argv(host, remote), input=input_text, capture_output=True, text=True, timeout=timeout_s,
                           check=False, stdin=None if input_text is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise RemoteError(f"{host.describe()}: {what or shlex.join(remote)} did not finish within {timeout_s:g}s") from None
    except FileNotFoundError:
        raise RemoteError(f"{host.describe()}: no `{SSH}` on this machine (install openssh-client)") from None
    if r.returncode == SSH_FAILED or (check and r.returncode != 0):
        raise failure(host, r.returncode, r.stderr, what)
    return r


@dataclass
class Session:
    """A command running on a host with its stdin and stdout held open here (text, line by line); its stderr goes
    to `stderr` (a file, or a pipe read at the end)."""

    host: Host
    proc: subprocess.Popen[str]

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def readline(self) -> str:
        """The command's next line; "" once its stdout is closed."""
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def close(self, timeout_s: float = 10.0) -> int:
        """Closes its stdin (the command sees EOF), waits, and kills ssh if it does not end; its exit status."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def error(self, what: str = "") -> RemoteError:
        """The error that explains why the session ended (it must have ended, or be ending)."""
        try:
            status = self.proc.wait(timeout=CONNECT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        err = self.proc.stderr.read() if self.proc.stderr is not None else ""
        return failure(self.host, status, err, what)


def session(host: Host, remote: Sequence[str], *, stderr: int | IO[Any] = subprocess.PIPE) -> Session:
    """Starts `remote` on the host with pipes to its stdin and stdout."""
    if (missing := _config_missing(host)) is not None:
        raise missing
    try:
        proc = subprocess.Popen(argv(host, remote), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                text=True, bufsize=1)
    except FileNotFoundError:
        raise RemoteError(f"{host.describe()}: no `{SSH}` on this machine (install openssh-client)") from None
    return Session(host, proc)


MARKER = re.compile(r"[A-Za-z0-9_.=-]+")


def kill_marked(host: Host, marker: str, timeout_s: float = 20.0) -> None:
    """Ends, on the host, every process whose command line holds `marker` (SIGTERM, then SIGKILL 2 s later):
    the backstop after its sessions were closed. The pattern's first letter is bracketed so that the remote shell
    running pkill, whose own command line holds the pattern, does not match it."""
    if not MARKER.fullmatch(marker):
        raise ValueError(f"marker {marker!r}: letters, digits and _.=- only")
    pattern = shlex.quote(f"[{marker[0]}]{marker[1:]}")
    # Nothing left (the usual case): done at once. Else SIGTERM, up to 2 s for them to go, then SIGKILL.
    script = (f"pkill -TERM -f {pattern} || exit 0; i=0; while pgrep -f {pattern} >/dev/null && [ $i -lt 20 ]; do "
              f"sleep 0.1; i=$((i + 1)); done; pkill -KILL -f {pattern}; exit 0")
    run(host, ["sh", "-c", script], timeout_s=timeout_s, what="pkill")


def sha256(host: Host, path: str) -> str | None:
    """The SHA-256 of a file on the host (`sha256sum`), None when it has no such file."""
    r = run(host, ["sh", "-c", 'sha256sum -- "$1" 2>/dev/null || true', "sh", path], what="sha256sum")
    words = r.stdout.split()
    return words[0] if words else None


def copy(host: Host, local: Path, dest: str, digest: str, timeout_s: float = RUN_TIMEOUT_S) -> None:
    """`local` to `dest` on the host, executable: written to DEST.part (`cat` over ssh), its SHA-256 checked against
    `digest`, then renamed, so a copy cut short is never taken for the file."""
    if (missing := _config_missing(host)) is not None:
        raise missing
    part = f"{dest}.part"
    script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod +x -- "$1"'
    with open(local, "rb") as f:
        r = subprocess.run(argv(host, ["sh", "-c", script, "sh", part]), stdin=f, capture_output=True,
                           timeout=timeout_s, check=False)
    if r.returncode != 0:
        raise failure(host, r.returncode, r.stderr.decode(errors="replace"), f"copying {local} to {part}")
    got = sha256(host, part)
    if got != digest:
        raise RemoteError(f"{host.describe()}: the copy of {local} at {part} has SHA-256 {got}, not {digest}")
    run(host, ["mv", "-f", "--", part, dest], what=f"renaming {part}")
