"""The experiment schema: experiment files, their validation, and the cells they expand to.

An experiment is read and checked completely before anything starts; every error names the field (as a
TOML path such as ``servers[1].flags.alloc``) and what it accepts.

Schema (every key below is optional unless marked *required*)::

    [experiment]
    name = "quick"              # default: the file's stem
    description = "..."
    repeats = 6                 # rounds: every cell once per round; the default gives a planted 15% effect
                                # 80% power on this machine (tests/analysis/test_stats.py)
    warmup_s = 2                # seconds of load discarded before the measured window; every time here
                                # takes a number of seconds or a duration ("30s", "1m30s"; docs/DESIGN.md)
    baseline = "go/grpc/pool=on"  # cell the ranking compares with; default: the first cell; or a list of one
                                # cell per [[servers]] table, each table judged against its own
                                # (xferbench/config/baselines.py; docs/EXPERIMENTS.md "A baseline per table")
    aa = false                  # also run the baseline a second time per round as "<baseline> (A/A)": the
                                # pair's verdicts show what the machine's noise alone produces
    alpha = 0.05                # family-wise rate of false verdicts in one report (Holm)
    profile = false             # sample the server's CPU in each measured window and attribute it to
                                # allocator, gc, copy, ... (xferbench/measure/profile/; EXPERIMENTS.md "CPU attribution")
    duet = true                 # run each cell at the same time as the baseline, so the machine's noise hits
                                # both alike (xferbench/run/matrix.py); the default when every cell has a fixed
                                # offered load, there are two cells or more, and the CPUs can be pinned
    backend = "process"         # process: servers run as host processes | docker: each in a container on the
                                # Docker-API engine (xferbench/run/containers/; docs/EXPERIMENTS.md "Servers in containers")

    [load]                      # the load of every cell (a server group may override any key)
    users = 8
    spawn_rate = 8              # users started per second
    duration_s = 8              # measured seconds (after warm-up)
    profile = "steady"          # steady | ramp | step | spike | soak
    steps = "50,100,200"        # with profile "step": explicit user levels, strictly increasing (a list of
                                # whole numbers in [load]); users becomes the last level
    step_s = 20                 # seconds each level is held; duration_s becomes levels x step_s; the runner
                                # cuts one measured window per level (xferbench/measure/steps.py), no warm-up apart
    settle_s = 5                # seconds after a level's users are all running before its window starts
    mix = "upload:1,download:1,echo:1"
    sizes = "64KiB"
    chunk = "64KiB"
    inflight = 4
    verify = "on"               # on | off
    meta_entries = 64           # Meta calls (mix "meta:1"): entries per call and bytes per key and value;
    meta_size = "8-64"          # these, echo_size and grpc_inflight are loadgen's options, its defaults if unset
    mode = "open"               # open: a fixed offered load (`rate`), the default whenever rate is set;
                                # closed: users call as fast as answers come (QPS then depends on scheduling);
                                # capacity: the highest rate meeting the SLO, searched per cell
    rate = "200"                # open: arrivals per second, "R" or "poisson:R"; capacity: the first step
    slo_p99 = "20ms"            # capacity: the client P99 that must hold
    slo_failures = 0.01         # capacity: the failed fraction of calls that must not be exceeded
    transport = "grpc"          # grpc | frame; may be a list in a server group (a matrix axis)
    driver = "locust"           # locust | xferload (frame, one method of echo/meta, steady; xferbench/run/generators.py)
    frame_codec = "protobuf"    # protobuf | gob: xferload --codec (gob needs driver = "xferload")
    call = "pkg.Service/Method" # any gRPC method (loadgen's CallUser), with data = '{"id": "{{seq}}"}' or
                                # "@req.json", proto / import_path / protoset; or locustfile = "users.py": your
                                # own Locust users, options = { "my-flag" = "v" } their own options (--my-flag v);
                                # processes = N: Locust distributed (xferbench/config/userload.py; paths relative
                                # to the experiment file; docs/EXPERIMENTS.md "Any gRPC method")
    hosts = ["gen1", "gen2"]    # [hosts] names: the load's Locust workers run there, `processes` per host (default
                                # 1), its master here, and the servers listen on this machine's address as those
                                # hosts reach it; Locust with loadgen's users, and a registry server or a command
                                # on a host ({addr}) (no locustfile or [network] yet). A list is an axis in
                                # [servers.load]: "gen1,gen2" is one value there. Checked before any cell
                                # (docs/EXPERIMENTS.md "Load from other hosts")
    tls = "on"                  # off | on | on-resume: the load over the server's TLS listener for its transport,
                                # trusting the run's throwaway CA (RUN/tls/); on: tickets off, no resumption, a
                                # full handshake per connection; on-resume: tickets on, clients resume. An axis in
                                # [servers.load] (c/frame/tls=on); refused for a kind or transport without a TLS
                                # listener, a command without {cert}/{key}, containers, a server on another host
                                # (xferbench/config/tls.py; docs/EXPERIMENTS.md "TLS")

    [hosts.gen1]                # a machine reached with your own `ssh` (BatchMode): xferbench/config/hosts.py
    ssh = "root@10.77.0.2"      # *required*: user@address, or an alias of your ssh configuration ("lab2")
    ssh_config = "../build/lab/ssh_config"  # ssh -F FILE; relative to the experiment file's folder
    python = "/srv/xb/.venv/bin/python"     # the Python there that has this project at this checkout's version;
                                # default: this checkout's .venv/bin/python (a host sharing this filesystem has
                                # it; else install the project there into a venv at the same path, or name it)
    root = "/srv/xb"            # the checkout there, where the workers run from; default: this checkout's path
    engine = "unix:///run/podman/podman.sock"  # its container engine's socket there, reached over its ssh: a
                                # [[servers]] host = "gen1" runs its container there with backend = "docker"

    [pinning]                   # CPU sets (CPU numbers as the kernel counts them). Default with >= 2 CPUs:
    server = [0]                # the server on the lower half, Locust on the upper half, disjoint
    generator = [1]
    mode = "auto"               # auto (the default above) | manual (server/generator as given) | none

    [network]                   # a Toxiproxy in front of each cell's server: Locust's traffic crosses it, the
                                # server's /metrics is still scraped directly (docs/EXPERIMENTS.md "Network conditions")
    latency = "20ms"            # added to every round trip (server → client side), whole milliseconds
    jitter = "5ms"              # ± uniformly around latency; needs latency, at most latency
    bandwidth = "100MiB/s"      # per connection and direction; size units as in `sizes`, at least 1000/s
    [soak]                      # a leak check instead of a ranking (xferbench/measure/soak.py): per run, RSS and live-heap
    growth_max = 0.05           # growth over the last third of the measured window (>= 30 s) above this fraction, or
    held_slack = 2              # descriptors, threads or goroutines held after the load above their count
                                # before it by more than this, flag the run "LEAK?"; no verdicts, no ranking;
                                # duet defaults to false

    [[servers]]                 # *required*, one or more groups; each expands to a matrix of cells
    server = "xferd-go"         # *required*: xferd-go | xferd-c | bare-echo (a kind of xferbench/config/servers.py) |
                                # command (any executable: command, ready, metrics, requests, pprof, cwd, files,
                                # alloc, gogc, image, ... as in xferbench/config/command.py; its relative paths
                                # start at the experiment file's folder; {cert} and {key}: the run's certificate)
    label = "go"                # short name used in cell names; default from the server
    binary = "build/bin/xferd-go"   # default: $XFERD_GO_BIN / $XFERD_C_BIN or build/bin/<server>
    args = ["--max-conns=256"]  # extra flags passed verbatim
    [servers.flags]             # server flags; a list is a matrix axis
    pool = ["on", "off"]
    [servers.env]               # environment; a list is a matrix axis; "" means "leave unset"
    MALLOC_ARENA_MAX = ["1", "2", "4", ""]
    [servers.load]              # overrides of [load]; a list is a matrix axis
    transport = ["grpc", "frame"]
    [servers.limits]            # backend = "docker" only: cgroup limits of the server's container; a list is
    cpus = 1.5                  # a matrix axis. cpus: CPU time in cores (CFS quota); memory: a size (the
    memory = "256MiB"           # container's memory limit, no swap beyond it)
    # image = "localhost/xferbench/xferd-go:dev"   # in [[servers]]: the container image (default per server;
                                                   # a command's is the user's, never built)

A cell is one point of a group's matrix; its name joins the label, the transport and every axis value
(``go/grpc/pool=on``), unless ``name`` in the group gives a template like ``"go-{pool}-{transport}"``.

The modules, from the bottom: ``model`` (what an Experiment is), ``values`` (checks every table shares),
``files`` (where experiments are), ``cpus`` ([pinning]), ``hosts`` ([hosts] and [load] hosts), ``tls`` ([load] tls),
``load`` ([load] and the drivers), ``tables`` ([network], [soak]), ``cells`` ([[servers]] groups to cells), ``parse``
(a file or document to an Experiment).
"""

from __future__ import annotations

from xferbench.config.cpus import (
    auto_pinning,
    available_cpus,
)
from xferbench.config.files import (
    EXPERIMENTS_DIR,
    ROOT,
    resolve,
    shipped,
)
from xferbench.config.load import (
    XFERLOAD_MAX_INFLIGHT,
    XFERLOAD_METHODS,
    check_driver,
    xferload_args,
)
from xferbench.config.model import (
    AA_SUFFIX,
    BACKENDS,
    DEFAULT_REPEATS,
    LOAD_KEYS,
    LOAD_MODES,
    LOADGEN_KEYS,
    PIN_MODES,
    TRANSPORTS,
    Cell,
    Experiment,
    ExperimentError,
    Host,
    Limits,
    Load,
    Network,
    Pinning,
    Soak,
    slug,
)
from xferbench.config.parse import (
    load_file,
    parse,
)
from xferbench.config.servers import ALLOCATORS  # cost.py reads it from the schema
from xferbench.config.tables import (
    BANDWIDTH_MIN,
)
from xferbench.config.values import (
    LIMIT_KEYS,
    MEMORY_LIMIT_MIN,
    parse_seconds,
)

__all__ = [
    "AA_SUFFIX",
    "ALLOCATORS",
    "BACKENDS",
    "BANDWIDTH_MIN",
    "DEFAULT_REPEATS",
    "EXPERIMENTS_DIR",
    "LIMIT_KEYS",
    "LOADGEN_KEYS",
    "LOAD_KEYS",
    "LOAD_MODES",
    "MEMORY_LIMIT_MIN",
    "PIN_MODES",
    "ROOT",
    "TRANSPORTS",
    "XFERLOAD_MAX_INFLIGHT",
    "XFERLOAD_METHODS",
    "Cell",
    "Experiment",
    "ExperimentError",
    "Host",
    "Limits",
    "Load",
    "Network",
    "Pinning",
    "Soak",
    "auto_pinning",
    "available_cpus",
    "check_driver",
    "load_file",
    "parse",
    "parse_seconds",
    "resolve",
    "shipped",
    "slug",
    "xferload_args",
]
