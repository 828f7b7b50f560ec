"""xferbench.measure.procfs against this very process and a process that has exited."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from xferbench.measure import procfs, tree


def test_this_process() -> None:
    st = procfs.status(os.getpid())
    rss, threads, fds = procfs.rss_bytes(st), procfs.threads(st), procfs.open_fds(os.getpid())
    assert rss is not None and rss > 1 << 20  # a Python interpreter with pytest loaded
    assert threads is not None and threads >= 1
    assert fds is not None and fds >= 3  # stdin, stdout, stderr at least
    r, w = os.pipe()
    try:
        assert procfs.open_fds(os.getpid()) == fds + 2  # counts every descriptor, exactly
    finally:
        os.close(r)
        os.close(w)


def test_a_process_that_has_exited_gives_none() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # reaped: the pid names no process any more
    assert procfs.status(p.pid) == {}
    assert procfs.rss_bytes({}) is None and procfs.threads({}) is None
    assert procfs.open_fds(p.pid) is None
    assert procfs.cpu_seconds(p.pid) is None and tree.sample(tree.ProcTree(p.pid)) is None


def test_cpu_seconds_of_a_busy_child_is_its_sample_s_and_grows() -> None:
    """A child that spins: the CPU time read alone is what a sample reads, and it grows as the child runs
    (half a second of spinning at the least: this reads it, and does not wait for it)."""
    p = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                          "while time.process_time() - t < 30: pass"])
    try:
        first = procfs.cpu_seconds(p.pid)
        assert first is not None
        deadline = time.monotonic() + 20
        while (now := procfs.cpu_seconds(p.pid)) is not None and now < first + 0.5 and time.monotonic() < deadline:
            time.sleep(0.02)  # a poll of the child's reading, not a wait for it
        assert now is not None and now >= first + 0.5, f"{first} -> {now}"
        s = tree.sample(tree.ProcTree(p.pid))
        again = procfs.cpu_seconds(p.pid)
        assert s is not None and again is not None and now <= s.cpu_s <= again
    finally:
        p.kill()
        p.wait()


# Lines as this machine's /proc/net/tcp and /proc/net/tcp6 print them (a listener, a TIME_WAIT socket each).
TCP4 = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:A851 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3141181 1 "
        "0000000071eceb57 100 0 0 10 0\n"
        "   1: 0100007F:D2F0 0100007F:1F90 06 00000000:00000000 03:00000DFE 00000000     0        0 0 3 "
        "0000000091a8531d\n")
TCP6 = ("  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
        "tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0000000000000000FFFF00000100007F:EDC8 0000000000000000FFFF00000100007F:9861 06 00000000:00000000 "
        "03:00000DFE 00000000     0        0 0 3 0000000091a8531d\n")


def test_tcp_tables_parse() -> None:
    assert procfs.tcp_sockets(TCP4) == [(0xA851, 0, 0x0A), (0xD2F0, 8080, 6)]
    assert procfs.tcp_sockets(TCP6) == [(0xEDC8, 0x9861, 6)]
    assert procfs.tcp_sockets("header only\n") == []


def test_time_wait_counts_either_end_in_both_tables(tmp_path) -> None:
    (tmp_path / "tcp").write_text(TCP4)
    (tmp_path / "tcp6").write_text(TCP6)
    tables = (str(tmp_path / "tcp"), str(tmp_path / "tcp6"))
    assert procfs.time_wait({8080}, tables) == 1  # the client's end: remote port 8080
    assert procfs.time_wait({0xEDC8}, tables) == 1  # an end whose local port is the one asked
    assert procfs.time_wait({0xA851}, tables) == 0  # a listener is not in TIME_WAIT
    assert procfs.time_wait({8080, 0x9861}, tables) == 2
    assert procfs.time_wait({8080}, (str(tmp_path / "absent"),)) is None


def _listener_with_no_time_wait() -> socket.socket:
    """A listener on a free port that no TIME_WAIT socket of an earlier connection names (another test's
    client may have used the same number as its own ephemeral port moments ago)."""
    for _ in range(50):
        listener = socket.create_server(("127.0.0.1", 0))
        if procfs.time_wait({listener.getsockname()[1]}) == 0:
            return listener
        listener.close()
    raise AssertionError("50 free ports in a row each had a TIME_WAIT socket")


def test_time_wait_of_a_real_connection_closed_by_the_client() -> None:
    """The side that closes first keeps the TIME_WAIT socket: here the client, whose remote port is the
    listener's; the live tables must show exactly one for that port."""
    with _listener_with_no_time_wait() as listener:
        port = listener.getsockname()[1]
        assert procfs.time_wait({port}) == 0
        client = socket.create_connection(("127.0.0.1", port))
        server, _ = listener.accept()
        client.close()  # FIN from the client first
        server.recv(1)  # sees the EOF
        server.close()
        deadline = time.monotonic() + 5
        while procfs.time_wait({port}) != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.time_wait({port}) == 1
