#!/usr/bin/env bash
# One headless Locust process against ghz on the same pinned xferd-go, in alternating rounds (BENCHMARKS.md
# "Locust users vs ghz"): gRPC Echo 256 B (16 users vs -c 16) and Upload 8 MiB in 1 MiB chunks (4 users vs -c 4).
# Locust's gRPC users run on its grpc.aio loop thread with the default --xfer-grpc-inflight (and LOCUST_ARGS, if
# given). For Echo, ghz also runs with --connections 16 ("ghz-c16"): Locust's 16 users hold 16 connections,
# while ghz's 16 workers share one connection by default, so plain ghz alone is not the like-for-like figure.
# Each run prints its rate and the generator's CPU (cores); medians and the ratios to ghz at the end.
#
#   scripts/studies/locust.sh                      # ROUNDS=3 RUN_SECONDS=10 SERVER_CPUS=0 GEN_CPUS=1
#   ROUNDS=5 LOCUST_ARGS="--xfer-grpc-inflight 1" scripts/studies/locust.sh
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${RUN_SECONDS:-10}
LOCUST_ARGS=${LOCUST_ARGS:-}
LOCUST=$BENCH_ROOT/.venv/bin/locust
GHZ=$BENCH_BIN/ghz
need "$LOCUST" "make build"
need ghz "make build"
[ -x "$BENCH_BIN/xferd-go" ] || { echo "missing $BENCH_BIN/xferd-go: make build" >&2; exit 2; }

# ghz's request data: a 256 B echo, and one 8 MiB upload (header, 8 chunks of 1 MiB, trailer with its CRC-32).
"$BENCH_ROOT/.venv/bin/python" - "$BENCH_TMP" <<'EOF'
import base64, json, sys, zlib
out = sys.argv[1]
json.dump({"payload": base64.b64encode(bytes(256)).decode()}, open(f"{out}/echo.json", "w"))
chunk = bytes(range(256)) * 4096
msgs = [{"header": {"name": "ghz-upload", "size": 8 << 20, "chunk_size": 1 << 20}}]
msgs += [{"chunk": base64.b64encode(chunk).decode()}] * 8
msgs.append({"trailer": {"crc32": zlib.crc32(chunk * 8)}})
json.dump(msgs, open(f"{out}/upload.json", "w"))
EOF

start_server "$BENCH_TMP/server.log" "$BENCH_BIN/xferd-go" --grpc-addr 127.0.0.1:0 --frame-addr 127.0.0.1:0 \
  --metrics-addr 127.0.0.1:0 --store mem
ADDR=$(ready_field grpc)

# timed OUT CMD...: runs CMD on the generator CPUs, stdout+stderr to OUT; sets GEN_CPU (cores over the run).
timed() {
  local out=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  on_gen /usr/bin/time -f "%U %S" -o "$out.time" "$@" >"$out" 2>&1 || true
  t1=$(date +%s.%N)
  GEN_CPU=$(awk -v t0="$t0" -v t1="$t1" '{ printf "%.2f\n", ($1 + $2) / (t1 - t0) }' "$out.time")
}

# locust_rate OUT ARGS...: one Locust run; sets RATE to whole operations per second from loadgen's run summary.
locust_rate() {
  local out=$1; shift
  timed "$out" "$LOCUST" -f "$BENCH_ROOT/loadgen" --headless --host "grpc://$ADDR" --xfer-metrics-port 0 \
    --only-summary -t "${SECONDS_PER_RUN}s" "$@"
  RATE=$(awk '$1 == "operations" { print $4; found = 1 } END { if (!found) exit 1 }' "$out") ||
    { echo "no Locust summary in $out:" >&2; tail -20 "$out" >&2; exit 1; }
}

# ghz_rate OUT ARGS...: one ghz run; sets RATE to its requests per second.
ghz_rate() {
  local out=$1; shift
  timed "$out" "$GHZ" --insecure --proto "$BENCH_ROOT/proto/xfer/v1/file_transfer.proto" \
    --import-paths "$BENCH_ROOT/proto" -z "${SECONDS_PER_RUN}s" "$@" "$ADDR"
  RATE=$(awk '/Requests\/sec:/ { print $2; found = 1 } END { if (!found) exit 1 }' "$out") ||
    { echo "no ghz rate in $out:" >&2; tail -20 "$out" >&2; exit 1; }
}

declare -A RATES CPUS
record() { RATES[$1]+=" $2"; CPUS[$1]+=" $3"; }

ECHO=(-u 16 -r 16 --xfer-mix echo:1 --xfer-echo-size 256)
UPLOAD=(-u 4 -r 4 --xfer-mix upload:1 --xfer-sizes 8MiB --xfer-chunk 1MiB)
# gens CASE: the generators of a case, in the order of an odd round.
gens() { if [ "$1" = echo ]; then echo "locust ghz ghz-c16"; else echo "locust ghz"; fi; }

printf '%-7s %-6s %-8s %12s %9s\n' round case gen rate gen_cpu
for r in $(seq 1 "$ROUNDS"); do
  for case in echo upload; do
    if [ "$case" = echo ]; then
      args=("${ECHO[@]}"); ghz_args=(--call xfer.v1.FileTransfer.Echo -D "$BENCH_TMP/echo.json" -c 16)
    else
      args=("${UPLOAD[@]}"); ghz_args=(--call xfer.v1.FileTransfer.Upload -D "$BENCH_TMP/upload.json" -c 4)
    fi
    # Alternate the order within a round so no generator always runs first on a warm (or cold) server.
    read -r -a order <<<"$(gens "$case")"
    if [ $((r % 2)) = 0 ]; then
      reversed=(); for gen in "${order[@]}"; do reversed=("$gen" "${reversed[@]}"); done; order=("${reversed[@]}")
    fi
    for gen in "${order[@]}"; do
      case $gen in
        # shellcheck disable=SC2086  # LOCUST_ARGS: words on purpose
        locust) locust_rate "$BENCH_TMP/run.log" "${args[@]}" $LOCUST_ARGS ;;
        ghz) ghz_rate "$BENCH_TMP/run.log" "${ghz_args[@]}" ;;
        ghz-c16) ghz_rate "$BENCH_TMP/run.log" "${ghz_args[@]}" --connections 16 ;;
      esac
      record "$case-$gen" "$RATE" "$GEN_CPU"
      printf '%-7s %-6s %-8s %12.1f %9.2f\n' "$r" "$case" "$gen" "$RATE" "$GEN_CPU"
    done
  done
done
stop_server

echo
echo "medians over $ROUNDS rounds (${SECONDS_PER_RUN} s runs; server on CPUs $SERVER_CPUS, generators on $GEN_CPUS)"
printf '%-7s %-8s %12s %9s %9s %9s\n' case gen "req/s" gen_cpu "x ghz" "x ghz-c16"
for case in echo upload; do
  # shellcheck disable=SC2086  # the recorded lists are space-separated on purpose
  g=$(median ${RATES[$case-ghz]})
  g16=-
  # shellcheck disable=SC2086
  [ -n "${RATES[$case-ghz-c16]:-}" ] && g16=$(median ${RATES[$case-ghz-c16]})
  for gen in $(gens "$case"); do
    # shellcheck disable=SC2086
    m=$(median ${RATES[$case-$gen]}); c=$(median ${CPUS[$case-$gen]})
    x16=-; [ "$g16" != - ] && x16=$(ratio "$m" "$g16")
    printf '%-7s %-8s %12.1f %9.2f %9s %9s\n' "$case" "$gen" "$m" "$c" "$(ratio "$m" "$g")" "$x16"
  done
done
