#!/usr/bin/env bash
# `make demo`: a tour of the parts in about 20 seconds, on free ports so it never collides with a running
# stack. Starts both servers, moves files with the py_client CLI over both transports, runs Locust for
# DEMO_SECONDS with a --xfer-check, shows the servers' own count of what they served, and stops them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=build/bin
py=.venv/bin/python
seconds=${DEMO_SECONDS:-10}
work=$(mktemp -d)
pids=()

stop_servers() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop_servers EXIT

step() { printf '\n== %s\n' "$*"; }

# Starts a server on port 0 and waits (at most 30 s) for the ready line PROTOCOL.md promises.
start() {
  local name=$1 log=$work/$1.log
  shift
  "$bin/$name" "$@" 2>"$log" &
  pids+=("$!")
  local deadline=$((SECONDS + 30))
  until grep -q "^$name ready " "$log"; do
    if ! kill -0 "${pids[-1]}" 2>/dev/null || ((SECONDS > deadline)); then
      echo "demo: $name did not start:" >&2
      cat "$log" >&2
      exit 1
    fi
    sleep 0.1
  done
  grep "^$name ready " "$log"
}

# The bound address of KEY (grpc, frame, metrics) on a server's ready line.
addr() { grep -o " $2=[^ ]*" "$work/$1.log" | head -n 1 | cut -d= -f2; }

step "two servers, on free ports"
start xferd-go --grpc-addr 127.0.0.1:0 --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0
start xferd-c --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --alloc jemalloc

step "py_client: upload, stat, download and echo, over gRPC and frame"
head -c 3000000 /dev/urandom >"$work/a.bin"
$py -m py_client upload --target "grpc://$(addr xferd-go grpc)" --name a.bin --file "$work/a.bin" --chunk 1048576
$py -m py_client stat --target "frame://$(addr xferd-go frame)" --name a.bin
$py -m py_client upload --target "frame://$(addr xferd-c frame)" --name a.bin --file "$work/a.bin" --chunk 1048576
$py -m py_client download --target "frame://$(addr xferd-c frame)" --name gen:10485760:7 --out "$work/b.bin"
$py -m py_client echo --target "grpc://$(addr xferd-go grpc)" --size 256

step "Locust: ${seconds} s of mixed uploads, downloads and echoes against xferd-c, failures==0 checked"
.venv/bin/locust -f loadgen/ --headless --only-summary --host "frame://$(addr xferd-c frame)" \
  -u 4 -r 4 -t "${seconds}s" --xfer-sizes 64KiB,1MiB --xfer-chunk 256KiB --xfer-metrics-port 0 \
  --xfer-check failures==0

step "what xferd-c counted (its /metrics)"
curl -fsS "http://$(addr xferd-c metrics)/metrics" | grep -E '^xfer_(requests_total|transfer_bytes_total|build_info)'

step "done: both servers stop now (SIGTERM, graceful)"
