"""Starting a run's server by its kind's `launcher` (a registry server or a command, as a host process or
in a container), the [network] proxy in front of it, and killing everything started."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from xferbench.config import Cell, Experiment, servers
from xferbench.config.tls import TLSFiles
from xferbench.run import commandserver, remoteserver, tlsfiles
from xferbench.run.handle import ServerHandle
from xferbench.run.live import CellFailed, Live
from xferbench.run.process import Server, ServerStartError, kill_all
from xferbench.run.toxiproxy import Toxiproxy, ToxiproxyError, network_toxics

if TYPE_CHECKING:  # the docker SDK is imported only when an experiment runs containers
    import docker


def container_engine(exp: Experiment) -> docker.DockerClient | None:
    """backend = "docker": a client of the engine (started when needed), after removing the containers of
    runners that died without cleaning up; the engines of other hosts that run servers ([hosts.NAME] engine)
    answering, cleared alike and given the images their cells use. Raises containers.engine.EngineError saying
    why there is none."""
    if exp.backend != "docker":
        return None
    from xferbench.run.containers import backend, engine, remote

    client = engine.ensure()
    backend.remove_orphans(client)
    _ensure_default_images(exp, client)
    _check_command_images(exp, client)
    remote.prepare(exp, client)
    return client


def _check_command_images(exp: Experiment, client: docker.DockerClient) -> None:
    """An image that is the user's (a command server's: its kind `needs_image`): present in the engine before any
    run, never built here."""
    import docker.errors

    from xferbench.run.containers.engine import EngineError

    for c in exp.cells:
        if not c.kind.needs_image:
            continue
        if not c.image:  # --backend docker over an experiment written for the host
            raise EngineError(f"cell {c.name!r}: a {c.server} server in a container needs image = \"<its image>\"")
        try:
            client.images.get(c.image)
        except docker.errors.ImageNotFound:
            raise EngineError(
                f"cell {c.name!r}: image {c.image!r} is not in the engine: pull or build it first "
                "(xferbench builds only its own servers' images)"
            ) from None


def _ensure_default_images(exp: Experiment, client: docker.DockerClient) -> None:
    """Build (once; later only when their inputs change) the `xferbench images build` images of the cells
    that use a server's default image; an image named by `image =` or $XFERBENCH_IMAGE_* is the user's."""
    from xferbench.run.containers import backend, images

    def say(b: images.Built) -> None:
        if b.built:
            print(f"xferbench: built {b.tag} ({b.seconds:.0f} s)", file=sys.stderr, flush=True)

    names = sorted(
        {
            image.name
            for c in exp.cells
            if (image := c.kind.image) and backend.image_for(c) == images.tag(image.name)
        }
    )
    if names:
        images.ensure(client, names, on_build=say)


def kill_everything() -> None:
    """Every child process and every container this runner started (Ctrl-C in a duet, SIGTERM)."""
    kill_all()
    if "xferbench.run.containers.backend" in sys.modules:
        from xferbench.run.containers import backend

        backend.kill_all()


def _registry_process(live: Live) -> ServerHandle:
    """A registry server as a host process: its binary on free ports, up at its ready line; with its load on other
    hosts, its transports listen on this machine's address as those hosts reach it (the run's placement)."""
    exp, cell = live.exp, live.run.cell
    spec = cell.kind
    assert isinstance(spec, servers.ServerSpec), "a registry kind"
    if cell.host is not None:
        return _remote_process(live)
    remote = live.placement.server_address if cell.load.hosts and live.placement is not None else None
    return Server(
        cell.server,
        cell.server_argv(remote, run_tls_files(live)),
        cell.server_env(),
        log_path=live.log("server"),
        cpus=exp.pinning.server or None,
        ready_word=spec.ready_word,
        own_cgroup=True,
    )


def _remote_process(live: Live) -> ServerHandle:
    """`[[servers]] host`: the server (a registry server or a command) on that host, over ssh, listening at the
    host's address as the host check found it (xferbench/run/remoteserver.py)."""
    exp, cell = live.exp, live.run.cell
    assert cell.host is not None
    return remoteserver.start(cell, exp.hosts[cell.host], _host_address(live), live.log("server"))


def _host_address(live: Live) -> str:
    """The address of the cell's host as the host check found it (its SSH_CONNECTION): where its server listens."""
    host = live.run.cell.host
    facts = next((h for h in live.placement.hosts if h.name == host), None) if live.placement else None
    if facts is None or not facts.address:
        raise ServerStartError(f"{host}: the host check found no address of it (its SSH_CONNECTION)", [])
    return facts.address


def _command_process(live: Live) -> ServerHandle:
    """A command server as a host process; its rendered [servers.files] stay with the run's logs: what the server
    was really given. A command naming {cert} or {key} is given the run's certificate there. With `[[servers]]
    host`, the command on that host instead."""
    exp, cell = live.exp, live.run.cell
    if cell.host is not None:
        return _remote_process(live)
    files = run_tls_files(live)
    return commandserver.start(cell, live.log("server"), exp.pinning.server or None, live.run_dir / "files" / live.stem,
                               files.placeholders() if files is not None else None)


def run_tls_files(live: Live) -> TLSFiles | None:
    """The run's CA and certificate, made at the first cell that needs them (xferbench/run/tlsfiles.py), naming this
    machine's address as other hosts reach it in a run with hosts (whichever cell comes first, the certificate is
    the run's); None for a cell that needs none."""
    cell = live.run.cell
    if not tlsfiles.needed(cell):
        return None
    address = live.placement.server_address if live.placement is not None else None
    try:
        return tlsfiles.ensure(live.run_dir, address)
    except tlsfiles.TLSFilesError as e:
        raise ServerStartError(f"the run's TLS certificate (load.tls = {cell.load.tls!r}): {e}", []) from None


# How a host process of each kind is started (the kind's `launcher`); in a container, every kind is a
# ContainerServer (xferbench/run/containers/backend.py, which keeps its own such table).
PROCESS_LAUNCHERS: dict[servers.Launcher, Callable[[Live], ServerHandle]] = {
    "registry": _registry_process,
    "command": _command_process,
}


def start_server(live: Live) -> ServerHandle:
    """The cell's server, up at its ready line (or a command's ready condition). Raises ServerStartError."""
    exp, cell = live.exp, live.run.cell
    if exp.backend != "docker":
        return PROCESS_LAUNCHERS[cell.kind.launcher](live)
    from xferbench.run.containers.backend import ContainerServer

    if live.engine is None:
        live.engine = container_engine(exp)
    assert live.engine is not None
    server: ContainerServer
    if cell.host is not None:  # on that host's engine ([hosts.NAME] engine), published on its address
        from xferbench.run.containers import remote

        server = remote.start(cell, exp.hosts[cell.host], _host_address(live), live.log("server"), live.run_dir.name)
    else:
        server = ContainerServer(
            live.engine, cell, log_path=live.log("server"), cpus=exp.pinning.server, run_label=live.run_dir.name
        )
    live.row.container = server.describe()
    return server


def load_listener(cell: Cell) -> str:
    """The ready field of the address the cell's load connects to: its transport's, or with a tls load its TLS
    listener for it."""
    return cell.kind.tls_listener(cell.transport) if cell.load.tls != "off" else cell.transport


def network_proxy(exp: Experiment, cell: Cell, server: ServerHandle, log_path: Path) -> tuple[Toxiproxy, str]:
    """[network]: a toxiproxy-server in front of the cell's transport listener, carrying the experiment's
    toxics; returns it and the address Locust connects to instead. It runs on the load generator's CPUs: it
    is the client's side of the wire and must not take the server's CPU time."""
    try:
        proxy = Toxiproxy(log_path=log_path, cpus=exp.pinning.generator or None)
    except ServerStartError as e:
        raise CellFailed(str(e), e.tail) from None
    try:
        listen = proxy.create_proxy(cell.transport, server.addr(load_listener(cell)))
        assert exp.network is not None
        for toxic in network_toxics(exp.network):
            proxy.add_toxic(cell.transport, toxic)
    except (ToxiproxyError, KeyError) as e:
        tail = proxy.tail()
        proxy.stop()
        raise CellFailed(f"toxiproxy: {e}", tail) from None
    return proxy, listen
