"""`python -m xferbench.run.containers` (`make containers`, set-up for `make test`): makes the Docker path ready — an
engine answering (DOCKER_HOST, or the Podman service this project starts), the debootstrap base image imported
and the project's images built from it (set-up, like `make build`: a fresh machine pays it once, and the tests
then time only themselves) — and says in one line what it has, or exactly why it cannot. Exits 0 either way, so the rest of
`make test` runs; the container tests then fail with the same reason (tests/run/containers/conftest.py).

`--stop` ends the Podman service this checkout started, if one runs (`make test` and `make test-slow` end with
it, so a tested clone leaves no service behind)."""

from __future__ import annotations

import sys

import docker.errors

from xferbench.run.containers import base, engine, images


def main() -> int:
    if sys.argv[1:] == ["--stop"]:
        print(f"containers: {'stopped the Podman service' if engine.stop_service() else 'no Podman service of ours ran'}")
        return 0
    built: list[images.Built] = []
    try:
        client = engine.ensure()
        tag = base.ensure_base(client)
        images.ensure(client, on_build=built.append)
    except (engine.EngineError, images.ImageError, docker.errors.DockerException) as e:
        print(f"containers: unavailable: {e}", file=sys.stderr)
        return 0
    fresh = [f"{b.name} ({b.seconds:.0f}s)" for b in built if b.built]
    print(f"containers: engine answering (API {client.api.api_version}), base image {tag}, "
          f"images {'built: ' + ', '.join(fresh) if fresh else 'current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
