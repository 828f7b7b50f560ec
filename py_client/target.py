"""Target URLs: `grpc://host:port` and `frame://host:port`."""

from __future__ import annotations

from dataclasses import dataclass

SCHEMES: tuple[str, ...] = ("grpc", "frame")


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int

    @property
    def address(self) -> str:
        """`host:port`, with brackets around an IPv6 literal."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.address}"


def split_host_port(address: str) -> tuple[str, int]:
    """Splits `host:port` (or `[v6]:port`); raises ValueError saying what is wrong."""
    if address.startswith("["):
        end = address.find("]")
        if end < 0 or address[end + 1 : end + 2] != ":":
            raise ValueError(f"address {address!r}: want [ipv6]:port")
        host, port_text = address[1:end], address[end + 2 :]
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep:
            raise ValueError(f"address {address!r} has no port: want host:port")
        if ":" in host:
            raise ValueError(f"address {address!r}: put an IPv6 host in brackets, [host]:port")
    if not host:
        raise ValueError(f"address {address!r} has no host: want host:port")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"address {address!r}: port {port_text!r} is not a number in 1..65535")
    return host, int(port_text)


def parse_target(url: str) -> Target:
    """Parses `scheme://host:port`; the scheme picks the transport."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"target {url!r} has no scheme: want one of "
                         + ", ".join(f"{s}://host:port" for s in SCHEMES))
    if scheme not in SCHEMES:
        raise ValueError(f"target {url!r}: unknown scheme {scheme!r}; accepted schemes: "
                         + ", ".join(SCHEMES))
    if "/" in rest or "?" in rest or "#" in rest:
        raise ValueError(f"target {url!r}: want {scheme}://host:port with nothing after the port")
    host, port = split_host_port(rest)
    return Target(scheme, host, port)
