#!/usr/bin/env bash
# Frame transfers vs the loopback ceiling (BENCHMARKS.md): for ROUNDS alternating rounds, iperf3's loopback TCP
# ceiling, then xferd-c and xferd-go (each freshly started, per store in STORES) under build/bin/xferload:
#   upload    64 MiB files in 1 MiB chunks
#   download  Read of a stored 64 MiB file in 1 MiB lengths
#   gen       Read of gen:64MiB:1 in 1 MiB lengths
# each SECONDS_PER_RUN seconds over CONNS connections x INFLIGHT calls in flight. Per round it prints MB/s
# (10^6 B/s of payload), the server's CPU seconds over the run (/proc/PID/stat), the generator's own CPU
# seconds (xferload's JSON, getrusage), each MB/s / iperf3 and xferd-c / xferd-go; then the medians.
# The server runs on SERVER_CPUS, xferload and the iperf3 client on GEN_CPUS (scripts/studies/lib.sh).
# Usage: scripts/studies/frame.sh   Env: ROUNDS (3), SECONDS_PER_RUN (5), STORES ("mem disk"), CONNS (2),
# INFLIGHT (4), SERVER_CPUS (0), GEN_CPUS (1). Needs `make build` (xferd-c, xferd-go, xferload) and iperf3.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_RUN:-5}
STORES=${STORES:-"mem disk"}
CONNS=${CONNS:-2}
INFLIGHT=${INFLIGHT:-4}
FILE=64MiB
CHUNK=1MiB
CASES="upload download gen"
SERVERS="xferd-c xferd-go"
for b in xferload xferd-c xferd-go; do need "$b" "make build"; done

declare -A MBPS CEIL_RATIO CPU GEN C_OVER_GO # "case/store/server" (or "case/store") -> values, one per round
CEILINGS=()

# json_field JSON KEY: one number from xferload's output.
json_field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
json_errors() { python3 -c 'import json,sys; e=json.loads(sys.argv[1])["errors"]; print(sum(e.values()))' "$1"; }

# load ARGS...: xferload against the running server on the generator CPUs; prints its JSON.
load() {
  on_gen "$BENCH_BIN/xferload" --addr "$(ready_field frame)" --conns "$CONNS" --inflight "$INFLIGHT" \
    --chunk "$CHUNK" --file-size "$FILE" "$@"
}

start() { # server store round
  local args=(--store mem)
  if [ "$2" = disk ]; then mkdir -p "$BENCH_TMP/$1-$3"; args=(--store "disk:$BENCH_TMP/$1-$3"); fi
  if [ "$1" = xferd-go ]; then args+=(--grpc-addr 127.0.0.1:0); fi
  start_server "$BENCH_TMP/$1-$2-$3.log" "$BENCH_BIN/$1" "${args[@]}" --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0
}

# measure round server store case ceiling ARGS...: one run; records and prints its figures.
measure() {
  local round=$1 server=$2 store=$3 case=$4 ceiling=$5; shift 5
  local c0 c1 out mbps cpu gen errors key=$case/$store/$server
  c0=$(cpu_seconds "$SERVER_PID")
  out=$(load --duration "${SECS}s" "$@")
  c1=$(cpu_seconds "$SERVER_PID")
  mbps=$(printf '%.0f' "$(json_field "$out" mb_per_s)")
  gen=$(printf '%.2f' "$(json_field "$out" cpu_seconds)")
  cpu=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')
  errors=$(json_errors "$out")
  [ "$errors" = 0 ] || { echo "xferload counted $errors errors: $out" >&2; exit 1; }
  MBPS[$key]+="$mbps "; CPU[$key]+="$cpu "; GEN[$key]+="$gen "
  CEIL_RATIO[$key]+="$(ratio "$mbps" "$ceiling") "
  printf '%-5s %-8s %-4s %-8s MB/s=%-6s /iperf3=%-6s server_cpu_s=%-5s gen_cpu_s=%-5s p99_us=%s\n' "$round" \
    "$case" "$store" "$server" "$mbps" "$(ratio "$mbps" "$ceiling")" "$cpu" "$gen" \
    "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["latency_us"]["p99"])' "$out")"
}

for round in $(seq 1 "$ROUNDS"); do
  ceiling=$(iperf3_mbps "$SECS")
  CEILINGS+=("$ceiling")
  echo "round $round: iperf3 loopback ceiling MB/s=$ceiling"
  order=$SERVERS
  [ $((round % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$SERVERS" | tac | tr '\n' ' ')
  for server in $order; do
    for store in $STORES; do
      start "$server" "$store" "$round"
      measure "$round" "$server" "$store" upload "$ceiling" --method upload
      # A one-call download uploads the file to read (setup) and names it in its JSON.
      name=$(json_field "$(load --method download --max-calls 1)" name)
      measure "$round" "$server" "$store" download "$ceiling" --method download --name "$name"
      measure "$round" "$server" "$store" gen "$ceiling" --method download --name gen:64MiB:1
      stop_server
    done
  done
  for case in $CASES; do
    for store in $STORES; do
      c=$(awk '{print $NF}' <<<"${MBPS[$case/$store/xferd-c]}"); g=$(awk '{print $NF}' <<<"${MBPS[$case/$store/xferd-go]}")
      C_OVER_GO[$case/$store]+="$(ratio "$c" "$g") "
      echo "round $round: $case $store xferd-c/xferd-go=$(ratio "$c" "$g")"
    done
  done
done

echo
echo "medians of $ROUNDS rounds (iperf3 ceiling MB/s=$(median "${CEILINGS[@]}"); ${CONNS} conns x ${INFLIGHT} in flight," \
  "$FILE files, $CHUNK chunks, ${SECS}s runs, server on CPU $SERVER_CPUS, generator on CPU $GEN_CPUS)"
printf '%-8s %-4s %-8s %8s %8s %12s %9s %10s\n' case store server MB/s /iperf3 server_cpu_s gen_cpu_s c/go
for case in $CASES; do
  for store in $STORES; do
    for server in $SERVERS; do
      key=$case/$store/$server
      # shellcheck disable=SC2086 # the lists are space-separated numbers
      printf '%-8s %-4s %-8s %8s %8s %12s %9s %10s\n' "$case" "$store" "$server" "$(median ${MBPS[$key]})" \
        "$(median ${CEIL_RATIO[$key]})" "$(median ${CPU[$key]})" "$(median ${GEN[$key]})" \
        "$([ "$server" = xferd-c ] && median ${C_OVER_GO[$case/$store]} || echo -)"
    done
  done
done
