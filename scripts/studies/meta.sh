#!/usr/bin/env bash
# The Meta call (PROTOCOL.md "Meta") on each server configuration, side by side in one sitting: a closed-loop
# Locust run of --xfer-mix meta:1 (ENTRIES entries of 8-64 bytes per key and value) against each, then one of
# echo:1 (256 B) as the baseline of a small call's fixed cost, and the server's CPU time per call (CPU seconds
# from /proc over the calls the client counted). The generator is Python and is usually the bottleneck of
# calls/s, so the comparable figure is the server's CPU per call; meta - echo is what the entries cost.
#
#   bash scripts/studies/meta.sh      # RUN_SECONDS=15 ENTRIES=64 USERS=8 by default
source "$(dirname "$0")/lib.sh"
SECONDS_RUN=${RUN_SECONDS:-15}
ENTRIES=${ENTRIES:-64}
USERS=${USERS:-8}
LOCUST=$BENCH_ROOT/.venv/bin/locust
[ -x "$LOCUST" ] || { echo "missing $LOCUST: make setup" >&2; exit 2; }

# measure MIX LABEL TRANSPORT BIN ARGS...: sets CALLS and US_PER_CALL (server CPU µs per call) for one run
measure() {
  local mix=$1 label=$2 transport=$3; shift 3
  start_server "$BENCH_TMP/$label.log" "$@" --store=mem
  local target="$transport://$(ready_field "$transport")" dump="$BENCH_TMP/$label.dump"
  mkdir -p "$dump"
  local cpu0 cpu1
  cpu0=$(cpu_seconds "$SERVER_PID")
  (cd "$BENCH_ROOT" && on_gen "$LOCUST" -f loadgen/ --headless --only-summary --host "$target" -u "$USERS" \
    -r "$USERS" -t "${SECONDS_RUN}s" --xfer-mix "$mix:1" --xfer-meta-entries "$ENTRIES" --xfer-metrics-port 0 \
    --xfer-metrics-dump "$dump" >/dev/null 2>"$BENCH_TMP/$label.locust")
  cpu1=$(cpu_seconds "$SERVER_PID")
  stop_server
  local bad
  CALLS=$(awk '/^xfer_client_requests_total\{/ {s += $NF} END {print s + 0}' "$dump"/*.prom)
  bad=$(awk '/^xfer_client_requests_total\{/ && !/code="ok"/ {s += $NF} END {print s + 0}' "$dump"/*.prom)
  [ "$bad" = 0 ] || { echo "$label $mix: $bad failed calls" >&2; tail -20 "$BENCH_TMP/$label.locust" >&2; exit 1; }
  US_PER_CALL=$(awk -v c="$cpu1" -v d="$cpu0" -v n="$CALLS" 'BEGIN { printf "%.1f", (n > 0 ? (c - d) * 1e6 / n : 0) }')
}

# run_one LABEL TRANSPORT BIN ARGS...: one line: Meta calls/s and server µs per call, Echo's, and the difference
run_one() {
  local meta_calls meta_us
  measure meta "$@"
  meta_calls=$CALLS meta_us=$US_PER_CALL
  measure echo "$1-echo" "${@:2}"
  printf '%-18s %9.0f %10s %10s %10.1f\n' "$1" "$(ratio "$meta_calls" "$SECONDS_RUN")" "$meta_us" "$US_PER_CALL" \
    "$(awk -v a="$meta_us" -v b="$US_PER_CALL" 'BEGIN { print a - b }')"
}

printf '# Meta, %d entries of 8-64 B, %d users, %ss per configuration, server CPUs %s, generator CPUs %s\n' \
  "$ENTRIES" "$USERS" "$SECONDS_RUN" "$SERVER_CPUS" "$GEN_CPUS"
printf '%-18s %9s %10s %10s %10s\n' config meta/s meta_us echo_us entries_us
run_one go-grpc grpc "$BENCH_BIN/xferd-go" --grpc-addr 127.0.0.1:0 --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0
run_one go-frame frame "$BENCH_BIN/xferd-go" --grpc-addr 127.0.0.1:0 --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0
for alloc in glibc jemalloc tcmalloc mimalloc pool; do
  run_one "c-frame-$alloc" frame "$BENCH_BIN/xferd-c" --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --alloc "$alloc"
done
