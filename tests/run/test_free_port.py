"""process.free_port: a loopback port below the kernel's ephemeral range, where no outgoing connection's source port
can take it between the check and the child's bind."""

from __future__ import annotations

import socket

from xferbench.run import process


def test_a_free_port_lies_below_the_ephemeral_range_and_binds() -> None:
    below = int(process.EPHEMERAL.read_text().split()[0])
    ports = [process.free_port() for _ in range(20)]
    assert all(process.LISTEN_PORTS_FROM <= p < below for p in ports), (ports, below)
    assert len(set(ports)) > 1, ports  # drawn at random, not the same one to every caller
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", ports[-1]))
