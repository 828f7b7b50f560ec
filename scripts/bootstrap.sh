#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: Debian packages (installed when root, otherwise
# the exact apt-get command is printed), a Go toolchain from the module proxy where the machine's is too old,
# Go modules, the Python venv with the project installed editable, and the Go and Rust tools the tests use.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Everything the builds, tests and experiments need from Debian.
APT_PACKAGES=(
  build-essential pkg-config python3-venv curl bc unzip ca-certificates
  protobuf-compiler protobuf-c-compiler libprotobuf-c-dev zlib1g-dev libdeflate-dev libssl-dev
  libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0
  clang libclang-rt-14-dev
  valgrind
  prometheus
  linux-perf
  etcd-server memcached nginx
  iperf3 socat  # make bench's loopback ceilings: TCP (iperf3), TLS (socat's OPENSSL address)
  openssh-server  # the sshd of each host of scripts/lab.sh's lab (network namespaces on this machine)
)
# Debian's packages that start (and enable) a system service on a fixed port; tests and experiments start
# their own instances on free ports, so bootstrap stops and disables these.
# openssh-server's `ssh` is an sshd on :22 of this machine: the lab (scripts/lab.sh) starts its own, one per host.
SERVICES=(prometheus etcd memcached nginx ssh)
GO_MIN_MINOR=25
# Where the machine's own Go is older (Debian 12 has 1.19) or absent, this toolchain comes from the Go module
# proxy, which serves every Go release as the module golang.org/toolchain (what `go` itself fetches under
# GOTOOLCHAIN). It is unpacked once per machine under ~/.cache/xferbench/toolchain/ and linked as build/go,
# which the Makefile puts first on PATH. The zips' SHA-256, pinned here, are checked before anything is unpacked.
GO_TOOLCHAIN=go1.26.8
declare -A GO_TOOLCHAIN_SHA256=(
  [linux-amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
  [linux-arm64]=02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99
)
# Toxiproxy puts latency, bandwidth limits and cut connections between Locust/py_client and a server
# (tests/servers/fault, an experiment's [network] table). Built from source with the Go toolchain: the module proxy
# is reachable where release downloads are not. Since v2.6 the command lives at cmd/server.
TOXIPROXY_VERSION=v2.12.0
# `make bench` drives gRPC with ghz (the anchor its Locust and xferload figures are ratios to); iperf3 above is
# its loopback ceiling. Both are set-up, so the bench's smoke test in `make test` finds them on a fresh machine.
GHZ_VERSION=v0.121.0
# Flame graphs of profiled runs (xferbench/measure/profile/flame.py): inferno, built with cargo from crates.io.
# Optional: a cargo that cannot build it (Debian 12's rustc 1.63 is too old) costs the flame graphs, not the set-up.
INFERNO_VERSION=0.12.8

say() { printf 'bootstrap [%ss]: %s\n' "$SECONDS" "$*"; }

# The packages of the arguments not installed yet.
missing_apt() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  echo "${missing[@]}"
}

install_apt() {
  local missing optional
  missing=$(missing_apt "${APT_PACKAGES[@]}")
  # shellcheck disable=SC2046
  optional=$(missing_apt $(container_packages))
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    # One line with everything, the container engine's packages too: run once, it leaves nothing for later.
    say "missing Debian packages: $missing"
    say "run: sudo apt-get update && sudo apt-get install -y --no-install-recommends $missing${optional:+ $optional}"
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

# The minor version of the `go` on PATH (0 when there is none).
go_minor() {
  command -v go >/dev/null || { echo 0; return; }
  go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/'
}

# build/go: the proxy's toolchain when the machine's Go is missing or too old (see GO_TOOLCHAIN above).
setup_go() {
  [ -x build/go/bin/go ] && export PATH="$root/build/go/bin:$PATH"
  if [ "$(go_minor)" -lt "$GO_MIN_MINOR" ]; then
    fetch_go_toolchain
    export PATH="$root/build/go/bin:$PATH"
  fi
  say "Go modules ($(go env GOVERSION), $(command -v go))"
  (cd servers/go && go mod download)
}

fetch_go_toolchain() {
  local arch platform cache dir zip want got
  arch=$(uname -m)
  case "$arch" in x86_64) platform=linux-amd64 ;; aarch64) platform=linux-arm64 ;; *)
    say "Go 1.$GO_MIN_MINOR or newer is needed, and no toolchain is pinned for $arch: install Go (https://go.dev/doc/install)"
    exit 1 ;;
  esac
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/xferbench/toolchain
  dir="$cache/golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.$platform"
  if [ ! -x "$dir/bin/go" ]; then
    say "fetching Go $GO_TOOLCHAIN ($platform) from the Go module proxy into $cache"
    mkdir -p "$cache"
    zip="$cache/$GO_TOOLCHAIN.$platform.zip.part"
    curl -fsSL --retry 3 -o "$zip" \
      "${GOPROXY_TOOLCHAIN:-https://proxy.golang.org}/golang.org/toolchain/@v/v0.0.1-$GO_TOOLCHAIN.$platform.zip"
    want=${GO_TOOLCHAIN_SHA256[$platform]}
    got=$(sha256sum "$zip" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
      rm -f "$zip"
      say "Go $GO_TOOLCHAIN ($platform): SHA-256 $got, expected $want; nothing unpacked"
      exit 1
    fi
    # Unpacked aside and renamed into place, so an interrupted set-up never leaves half a toolchain.
    rm -rf "$dir.part" && mkdir -p "$dir.part"
    unzip -q "$zip" -d "$dir.part"
    mv "$dir.part/golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.$platform" "$dir"
    rm -rf "$dir.part" "$zip"
  fi
  mkdir -p build
  ln -sfn "$dir" build/go
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
  local stamp=build/bin/.inferno.failed rustc
  if command -v inferno-flamegraph >/dev/null || [ -x "$HOME/.cargo/bin/inferno-flamegraph" ] \
     || [ -x build/bin/inferno-flamegraph ]; then
    return 0
  fi
  if ! command -v cargo >/dev/null; then
    say "cargo not found: profiled runs will keep folded stacks but draw no flame graph (install Rust, rerun)"
    return 0
  fi
  rustc=$(rustc --version 2>/dev/null || echo "rustc unknown")
  # A failed build is remembered per compiler, so each set-up does not spend a minute failing again.
  if [ "$(cat "$stamp" 2>/dev/null)" = "$rustc" ]; then
    return 0
  fi
  say "building inferno $INFERNO_VERSION (flame graphs) into build/bin"
  mkdir -p build/bin
  if ! cargo install --quiet --locked --root build --version "$INFERNO_VERSION" inferno; then
    echo "$rustc" > "$stamp"
    say "inferno $INFERNO_VERSION does not build with $rustc: profiled runs keep folded stacks but draw no flame graph (a newer Rust via rustup, then rm $stamp)"
  fi
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

# The container packages this machine needs: compose always, the Podman engine where no Docker answers.
container_packages() {
  echo "${COMPOSE_APT_PACKAGES[@]}"
  if [ -z "${DOCKER_HOST:-}" ] && [ ! -S /var/run/docker.sock ]; then
    echo "${CONTAINER_APT_PACKAGES[@]}"
  fi
}

install_container_engine() {
  local missing
  # shellcheck disable=SC2046
  missing=$(missing_apt $(container_packages))
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    say "containers: not root, so $missing cannot be installed: the Docker path and the compose tests are unavailable"
    return 0
  fi
  say "containers: installing $missing"
  # shellcheck disable=SC2086
  if ! (export DEBIAN_FRONTEND=noninteractive; apt-get update -qq \
        && apt-get install -y -qq --no-install-recommends $missing >/dev/null); then
    say "containers: apt-get install $missing failed: the Docker path is unavailable"
  fi
}

install_apt
install_container_engine
setup_go
install_toxiproxy
install_ghz
install_inferno
setup_python
say "ready"
