#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: Debian packages (installed when root, otherwise
# the exact apt-get command is printed), the Python venv with the project installed editable, Go modules.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Everything the builds, tests and experiments need from Debian.
APT_PACKAGES=(
  build-essential pkg-config python3-venv curl bc
  protobuf-compiler protobuf-c-compiler libprotobuf-c-dev zlib1g-dev
  libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0
  clang libclang-rt-14-dev
  prometheus
)
GO_MIN_MINOR=25

say() { printf 'bootstrap: %s\n' "$*"; }

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
  # The prometheus package starts a system service on :9090; tests start their own on free ports.
  if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl stop prometheus || true
  fi
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
  (cd servers/go && go mod download)
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

install_apt
check_go
setup_python
say "ready"
