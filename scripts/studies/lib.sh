# Shared pieces of the study scripts in scripts/studies/, the measurements behind BENCHMARKS.md's studies (sourced,
# not run).
#
# Every figure these scripts print is a ratio of two things measured side by side in one sitting, with the
# server and the load generator pinned to separate CPUs (taskset), so neither steals the other's core and a
# generator at 100% of its CPU is visible as such. Override the split with SERVER_CPUS / GEN_CPUS.
set -euo pipefail

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_BIN=$BENCH_ROOT/build/bin
SERVER_CPUS=${SERVER_CPUS:-0}
GEN_CPUS=${GEN_CPUS:-1}
BENCH_TMP=$(mktemp -d)
BENCH_PIDS=()
CLK_TCK=$(getconf CLK_TCK)

bench_cleanup() {
  local p
  for p in "${BENCH_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$BENCH_TMP"
}
trap bench_cleanup EXIT

# need TOOL HINT: fail with the way to install TOOL when it is missing.
need() {
  command -v "$1" >/dev/null || [ -x "$BENCH_BIN/$1" ] || { echo "missing $1: $2" >&2; exit 2; }
}

# on_server CMD...: run CMD pinned to the server's CPUs; on_gen CMD...: pinned to the generator's.
on_server() { taskset -c "$SERVER_CPUS" "$@"; }
on_gen() { taskset -c "$GEN_CPUS" "$@"; }

# start_server LOG BIN ARGS...: start a server on the server CPUs, wait (bounded) for its ready line in LOG,
# and set SERVER_PID and SERVER_READY (the ready line). Addresses come from ready_field.
start_server() {
  local log=$1; shift
  # taskset itself, not on_server: a backgrounded function is a subshell, whose PID is not the server's
  # (cpu_seconds would read the shell's, and SIGTERM would orphan the server).
  : >"$log" # exists before the first grep below (the child opens it only once forked)
  taskset -c "$SERVER_CPUS" "$@" 2>"$log" &
  SERVER_PID=$!
  BENCH_PIDS+=("$SERVER_PID")
  local i
  for i in $(seq 1 400); do
    if SERVER_READY=$(grep -m1 ' ready ' "$log" 2>/dev/null); then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.025
  done
  echo "server did not become ready: $*" >&2; cat "$log" >&2; exit 1
}

# ready_field NAME: NAME=VALUE from the last server's ready line (grpc, frame, metrics, ...).
ready_field() { sed -E "s/.* $1=([^ ]+).*/\\1/" <<<"$SERVER_READY"; }

stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
}

# cpu_seconds PID: user+system CPU seconds the process has used so far.
cpu_seconds() { awk -v hz="$CLK_TCK" '{printf "%.2f\n", ($14 + $15) / hz}' "/proc/$1/stat"; }

# iperf3_mbps SECONDS: loopback TCP ceiling in MB/s (10^6 B/s), 1 MiB writes, iperf3's server on the server
# CPUs and its client on the generator CPUs, like the servers under test.
iperf3_mbps() {
  need iperf3 "apt-get install iperf3"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  on_server iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  local spid=$!
  local i
  # Poll the listening sockets, not the port: iperf3 -s -1 would take a probe connection for its one test.
  for i in $(seq 1 200); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.025; done
  on_gen iperf3 -c 127.0.0.1 -p "$port" -l 1M -t "$1" -J |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e6))'
  wait "$spid" 2>/dev/null || true
}

# ratio A B: A / B to three decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", (b > 0 ? a / b : 0) }'; }

# median V...: the median of the values.
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
