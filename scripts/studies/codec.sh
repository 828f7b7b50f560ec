#!/usr/bin/env bash
# net/rpc codecs, gob against protobuf (BENCHMARKS.md): xferd-go's frame listener served with --frame-codec protobuf
# (PROTOCOL.md's frames) and --frame-codec gob (net/rpc's own gob stream, proto/GOB.md), each freshly started,
# driven by build/bin/xferload --codec of the same name, for ROUNDS alternating rounds:
#   echo      Echo of a 256-byte payload, CONNS connections x INFLIGHT calls in flight
#   echo128   the same with 128 concurrent callers (CONNS x 128/CONNS in flight): the report's point
#   upload    64 MiB files in 1 MiB UploadChunk calls, CONNS x INFLIGHT
# each SECONDS_PER_RUN seconds. Per run, from the server's own /metrics and /proc: calls (the delta of
# xfer_requests_total{transport="frame"}), req/s (xferload's calls_per_s), server CPU per call in µs
# (/proc/PID/stat delta / calls) and allocations per call (go_memstats_mallocs_total delta / calls); per round
# and as medians, gob / protobuf for each. The server runs on SERVER_CPUS, xferload on GEN_CPUS (lib.sh).
# Usage: scripts/studies/codec.sh   Env: ROUNDS (3), SECONDS_PER_RUN (5), CONNS (2), INFLIGHT (4),
# SERVER_CPUS (0), GEN_CPUS (1). Needs `make build` (xferd-go, xferload).
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_RUN:-5}
CONNS=${CONNS:-2}
INFLIGHT=${INFLIGHT:-4}
CODECS="protobuf gob"
CASES="echo echo128 upload"
for b in xferload xferd-go; do need "$b" "make build"; done

declare -A RPS CPU_US ALLOCS RATIO # "case/codec" (or "case/figure" for gob/protobuf) -> values, one per round

json_field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
json_errors() { python3 -c 'import json,sys; e=json.loads(sys.argv[1])["errors"]; print(sum(e.values()))' "$1"; }

# server_counter NAME [LABEL=VALUE]: the sum of NAME's samples (with that label) on the server's /metrics.
server_counter() {
  python3 - "http://$(ready_field metrics)/metrics" "$@" <<'PY'
import re, sys, urllib.request
url, name = sys.argv[1], sys.argv[2]
want = [f'{a.split("=", 1)[0]}="{a.split("=", 1)[1]}"' for a in sys.argv[3:]]
text = urllib.request.urlopen(url, timeout=5).read().decode()
total = 0.0
for line in text.splitlines():
    m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
    if m and m[1] == name and all(w in (m[2] or "") for w in want):
        total += float(m[3])
print(repr(total))
PY
}

case_args() {
  case $1 in
    echo) echo --method echo --size 256 --conns "$CONNS" --inflight "$INFLIGHT" ;;
    echo128) echo --method echo --size 256 --conns "$CONNS" --inflight $((128 / CONNS)) ;;
    upload) echo --method upload --chunk 1MiB --file-size 64MiB --conns "$CONNS" --inflight "$INFLIGHT" ;;
  esac
}

# measure round codec case: one run against the running server; records and prints its figures.
measure() {
  local round=$1 codec=$2 case=$3 key=$3/$2
  local c0 c1 n0 n1 m0 m1 out calls rps cpu_us allocs
  # shellcheck disable=SC2046 # case_args is a flag list
  on_gen "$BENCH_BIN/xferload" --addr "$(ready_field frame)" --codec "$codec" $(case_args "$case") \
    --duration 1s >/dev/null # warm the server (pools, goroutine stacks) before the measured run
  n0=$(server_counter xfer_requests_total transport=frame); m0=$(server_counter go_memstats_mallocs_total)
  c0=$(cpu_seconds "$SERVER_PID")
  # shellcheck disable=SC2046
  out=$(on_gen "$BENCH_BIN/xferload" --addr "$(ready_field frame)" --codec "$codec" $(case_args "$case") \
    --duration "${SECS}s")
  c1=$(cpu_seconds "$SERVER_PID")
  n1=$(server_counter xfer_requests_total transport=frame); m1=$(server_counter go_memstats_mallocs_total)
  [ "$(json_errors "$out")" = 0 ] || { echo "xferload counted errors: $out" >&2; exit 1; }
  calls=$(awk -v a="$n0" -v b="$n1" 'BEGIN { printf "%d", b - a }')
  rps=$(printf '%.0f' "$(json_field "$out" calls_per_s)")
  cpu_us=$(awk -v a="$c0" -v b="$c1" -v n="$calls" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')
  allocs=$(awk -v a="$m0" -v b="$m1" -v n="$calls" 'BEGIN { printf "%.1f", (b - a) / n }')
  RPS[$key]+="$rps "; CPU_US[$key]+="$cpu_us "; ALLOCS[$key]+="$allocs "
  printf '%-5s %-8s %-8s req/s=%-7s server_cpu_us/call=%-7s allocs/call=%-7s gen_cpu_cores=%s\n' "$round" "$case" \
    "$codec" "$rps" "$cpu_us" "$allocs" "$(printf '%.2f' "$(json_field "$out" cpu_cores)")"
}

last() { awk '{print $NF}' <<<"$1"; }

for round in $(seq 1 "$ROUNDS"); do
  order=$CODECS
  [ $((round % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$CODECS" | tac | tr '\n' ' ')
  for codec in $order; do
    start_server "$BENCH_TMP/$codec-$round.log" "$BENCH_BIN/xferd-go" --frame-codec "$codec" --store mem \
      --grpc-addr 127.0.0.1:0 --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0
    for case in $CASES; do measure "$round" "$codec" "$case"; done
    stop_server
  done
  for case in $CASES; do
    RATIO[$case/rps]+="$(ratio "$(last "${RPS[$case/gob]}")" "$(last "${RPS[$case/protobuf]}")") "
    RATIO[$case/cpu]+="$(ratio "$(last "${CPU_US[$case/gob]}")" "$(last "${CPU_US[$case/protobuf]}")") "
    RATIO[$case/allocs]+="$(ratio "$(last "${ALLOCS[$case/gob]}")" "$(last "${ALLOCS[$case/protobuf]}")") "
    echo "round $round: $case gob/protobuf req/s=$(last "${RATIO[$case/rps]}") cpu/call=$(last "${RATIO[$case/cpu]}")" \
      "allocs/call=$(last "${RATIO[$case/allocs]}")"
  done
done

echo
echo "medians of $ROUNDS rounds (${SECS}s runs; echo: 256 B, $CONNS conns x $INFLIGHT; echo128: $CONNS conns x" \
  "$((128 / CONNS)); upload: 1 MiB chunks of 64 MiB files, $CONNS conns x $INFLIGHT; server on CPU $SERVER_CPUS," \
  "xferload on CPU $GEN_CPUS)"
printf '%-8s %-9s %9s %18s %12s\n' case codec req/s server_cpu_us/call allocs/call
for case in $CASES; do
  for codec in $CODECS; do
    key=$case/$codec
    # shellcheck disable=SC2086 # the lists are space-separated numbers
    printf '%-8s %-9s %9s %18s %12s\n' "$case" "$codec" "$(median ${RPS[$key]})" "$(median ${CPU_US[$key]})" \
      "$(median ${ALLOCS[$key]})"
  done
  # shellcheck disable=SC2086
  printf '%-8s %-9s %9s %18s %12s\n' "$case" gob/proto "$(median ${RATIO[$case/rps]})" \
    "$(median ${RATIO[$case/cpu]})" "$(median ${RATIO[$case/allocs]})"
done
