"""`python -m xferbench.containers` (`make containers`, part of `make test`): makes the Docker path ready — an
engine answering (DOCKER_HOST, or the Podman service this project starts) and the debootstrap base image
imported — and says in one line what it has, or exactly why it cannot. Exits 0 either way, so the rest of
`make test` runs; the container tests then fail with the same reason (tests/containers/conftest.py)."""

from __future__ import annotations

import sys

from xferbench.containers import base, engine


def main() -> int:
    try:
        client = engine.ensure()
        tag = base.ensure_base(client)
    except engine.EngineError as e:
        print(f"containers: unavailable: {e}", file=sys.stderr)
        return 0
    print(f"containers: engine answering (API {client.api.api_version}), base image {tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
