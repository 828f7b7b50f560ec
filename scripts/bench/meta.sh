#!/usr/bin/env bash
# The Meta call (PROTOCOL.md "Meta") on each server configuration, side by side in one sitting: a closed-loop
# Locust run of --xfer-mix meta:1 (ENTRIES entries of 8-64 bytes per key and value) against each, and the
# server's CPU time per call (CPU seconds from /proc over the calls the client counted). The generator is
# Python and is usually the bottleneck of calls/s, so the comparable figure is the server's CPU per call.
#
#   bash scripts/bench/meta.sh      # RUN_SECONDS=15 ENTRIES=64 USERS=8 by default
source "$(dirname "$0")/lib.sh"
SECONDS_RUN=${RUN_SECONDS:-15}
ENTRIES=${ENTRIES:-64}
USERS=${USERS:-8}
LOCUST=$BENCH_ROOT/.venv/bin/locust
[ -x "$LOCUST" ] || { echo "missing $LOCUST: make setup" >&2; exit 2; }

# run_one LABEL TRANSPORT BIN ARGS...: prints LABEL calls calls/s server-µs/call
run_one() {
  local label=$1 transport=$2; shift 2
  start_server "$BENCH_TMP/$label.log" "$@" --store=mem
  local target="$transport://$(ready_field "$transport")" dump="$BENCH_TMP/$label.dump"
  mkdir -p "$dump"
  local cpu0 cpu1
  cpu0=$(cpu_seconds "$SERVER_PID")
  (cd "$BENCH_ROOT" && on_gen "$LOCUST" -f loadgen/ --headless --only-summary --host "$target" -u "$USERS" \
    -r "$USERS" -t "${SECONDS_RUN}s" --xfer-mix meta:1 --xfer-meta-entries "$ENTRIES" --xfer-metrics-port 0 \
    --xfer-metrics-dump "$dump" >/dev/null 2>"$BENCH_TMP/$label.locust")
  cpu1=$(cpu_seconds "$SERVER_PID")
  stop_server
  local calls bad
  calls=$(awk '/^xfer_client_requests_total\{.*method="Meta"/ {s += $NF} END {print s + 0}' "$dump"/*.prom)
  bad=$(awk '/^xfer_client_requests_total\{.*method="Meta"/ && !/code="ok"/ {s += $NF} END {print s + 0}' "$dump"/*.prom)
  [ "$bad" = 0 ] || { echo "$label: $bad failed calls" >&2; tail -20 "$BENCH_TMP/$label.locust" >&2; exit 1; }
  printf '%-22s %8d %9.0f %12.1f\n' "$label" "$calls" "$(ratio "$calls" "$SECONDS_RUN")" \
    "$(awk -v c="$cpu1" -v d="$cpu0" -v n="$calls" 'BEGIN { printf "%.1f", (n > 0 ? (c - d) * 1e6 / n : 0) }')"
}

printf '# Meta, %d entries of 8-64 B, %d users, %ss per configuration, server CPUs %s, generator CPUs %s\n' \
  "$ENTRIES" "$USERS" "$SECONDS_RUN" "$SERVER_CPUS" "$GEN_CPUS"
printf '%-22s %8s %9s %12s\n' config calls calls/s server_us/call
run_one go-grpc grpc "$BENCH_BIN/xferd-go" --grpc-addr 127.0.0.1:0 --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0
run_one go-frame frame "$BENCH_BIN/xferd-go" --grpc-addr 127.0.0.1:0 --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0
for alloc in glibc jemalloc tcmalloc mimalloc pool; do
  run_one "c-frame-$alloc" frame "$BENCH_BIN/xferd-c" --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --alloc "$alloc"
done
