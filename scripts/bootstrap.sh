#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: Debian packages (installed when root, otherwise
# the exact apt-get command is printed), the Python venv with the project installed editable, Go modules.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Everything the builds, tests and experiments need from Debian.
APT_PACKAGES=(
  build-essential pkg-config python3-venv curl bc
  protobuf-compiler protobuf-c-compiler libprotobuf-c-dev zlib1g-dev libdeflate-dev
  libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0
  clang libclang-rt-14-dev
  valgrind
  prometheus
  linux-perf
  etcd-server memcached nginx
  iperf3
)
# Debian's packages that start (and enable) a system service on a fixed port; tests and experiments start
# their own instances on free ports, so bootstrap stops and disables these.
SERVICES=(prometheus etcd memcached nginx)
GO_MIN_MINOR=25
# Toxiproxy puts latency, bandwidth limits and cut connections between Locust/py_client and a server
# (tests/fault, an experiment's [network] table). Built from source with the Go toolchain: the module proxy
# is reachable where release downloads are not. Since v2.6 the command lives at cmd/server.
TOXIPROXY_VERSION=v2.12.0
# `make bench` drives gRPC with ghz (the anchor its Locust and xferload figures are ratios to); iperf3 above is
# its loopback ceiling. Both are set-up, so the bench's smoke test in `make test` finds them on a fresh machine.
GHZ_VERSION=v0.121.0
# Flame graphs of profiled runs (xferbench/measure/profile/flame.py): inferno, built with cargo from crates.io.
INFERNO_VERSION=0.12.8

say() { printf 'bootstrap [%ss]: %s\n' "$SECONDS" "$*"; }

missing_apt() {
  local p missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  echo "${missing[@]}"
}

install_apt() {
  local missing
  missing=$(missing_apt)
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    say "missing Debian packages: $missing"
    say "run: sudo apt-get update && sudo apt-get install -y $missing"
    exit 1
  fi
  say "installing Debian packages: $missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
  quiet_services
}

# A package's service left running would hold its port (:9090, :2379, :11211, :80) and memory during every run;
# enabled, it would come back at the next boot.
quiet_services() {
  command -v systemctl >/dev/null || return 0
  local s
  for s in "${SERVICES[@]}"; do
    if systemctl is-active --quiet "$s" 2>/dev/null; then
      systemctl stop "$s" || true
    fi
    if systemctl is-enabled --quiet "$s" 2>/dev/null; then
      systemctl disable --quiet "$s" 2>/dev/null || true
    fi
  done
}

check_go() {
  if ! command -v go >/dev/null; then
    say "Go 1.$GO_MIN_MINOR or newer is needed (https://go.dev/doc/install); 'go' is not on PATH"
    exit 1
  fi
  local minor
  minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
  if [ "$minor" -lt "$GO_MIN_MINOR" ]; then
    say "Go 1.$GO_MIN_MINOR or newer is needed; found $(go env GOVERSION)"
    exit 1
  fi
  say "Go modules"
  (cd servers/go && go mod download)
}

install_toxiproxy() {
  local bin=build/bin/toxiproxy-server stamp=build/bin/.toxiproxy-server.version tmp
  if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$TOXIPROXY_VERSION" ]; then
    return 0
  fi
  say "building toxiproxy-server $TOXIPROXY_VERSION into $bin"
  mkdir -p build/bin
  tmp=$(mktemp -d)
  # go install names the binary after the package directory ("server"): install aside, then rename.
  GOBIN="$tmp" GOFLAGS= go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mv "$tmp/server" "$bin"
  rmdir "$tmp"
  echo "$TOXIPROXY_VERSION" > "$stamp"
}

install_ghz() {
  local stamp=build/bin/.ghz.version
  [ -x build/bin/ghz ] && [ "$(cat "$stamp" 2>/dev/null)" = "$GHZ_VERSION" ] && return 0
  say "building ghz $GHZ_VERSION into build/bin"
  mkdir -p build/bin
  GOBIN="$root/build/bin" GOFLAGS= go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
  echo "$GHZ_VERSION" > "$stamp"
}

install_inferno() {
  if command -v inferno-flamegraph >/dev/null || [ -x "$HOME/.cargo/bin/inferno-flamegraph" ] \
     || [ -x build/bin/inferno-flamegraph ]; then
    return 0
  fi
  if ! command -v cargo >/dev/null; then
    say "cargo not found: profiled runs will keep folded stacks but draw no flame graph (install Rust, rerun)"
    return 0
  fi
  say "building inferno $INFERNO_VERSION (flame graphs) into build/bin"
  cargo install --quiet --locked --root build --version "$INFERNO_VERSION" inferno
}

setup_python() {
  local py=${PYTHON:-python3}
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    say "Python 3.11 or newer is needed as '$py'; found $("$py" --version 2>&1 || echo none)"
    exit 1
  fi
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  # Reinstall only when the project's requirements changed since the last install.
  local stamp=.venv/.xferbench-installed
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    say "installing the Python package and its dependencies into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[dev]'
    touch "$stamp"
  fi
}

# --- the Docker path (docs/EXPERIMENTS.md "Servers in containers"; xferbench/run/containers/) -------------------------------------------
# Without DOCKER_HOST or a Docker daemon, the project runs its own Podman API service (runc: crun refuses
# cgroup v1) and builds a base image with debootstrap. Optional: where it cannot be had, one line says why
# and the rest goes on. The engine and base image themselves are prepared by `make containers` (in `make
# test`), not here: debootstrap is slow and `make run` must not wait for it.
# dnsname: containers on one compose network find each other by service name (the Locust workers reach
# `locust-master`) only through this CNI plugin; without it Podman 4.3 resolves no names and the stack's workers
# never connect.
CONTAINER_APT_PACKAGES=(podman runc debootstrap golang-github-containernetworking-plugin-dnsname)
# docker-compose 1.29 speaks the Docker API, so it drives any engine (a Docker daemon or the Podman service
# above); the compose-stack tests need it whichever engine there is.
COMPOSE_APT_PACKAGES=(docker-compose)

install_container_engine() {
  local p wanted=("${COMPOSE_APT_PACKAGES[@]}") missing=()
  if [ -z "${DOCKER_HOST:-}" ] && [ ! -S /var/run/docker.sock ]; then
    wanted+=("${CONTAINER_APT_PACKAGES[@]}")
  fi
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    say "containers: not root, so ${missing[*]} cannot be installed: the Docker path and the compose tests are unavailable"
    return 0
  fi
  say "containers: installing ${missing[*]}"
  if ! (export DEBIAN_FRONTEND=noninteractive; apt-get update -qq \
        && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null); then
    say "containers: apt-get install ${missing[*]} failed: the Docker path is unavailable"
  fi
}

install_apt
install_container_engine
check_go
install_toxiproxy
install_ghz
install_inferno
setup_python
say "ready"
