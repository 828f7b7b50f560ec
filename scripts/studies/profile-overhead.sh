#!/usr/bin/env bash
# What sampling the server costs it: the same cell measured without and with `--profile`, alternating,
# PAIRS times per server, each run pinned by the runner (server and Locust on separate CPUs) at a fixed offered
# load. Prints, per server, the median of each pair's ratio profiled / unprofiled for the server's CPU per
# request and the client's P50 (BENCHMARKS.md, "CPU attribution: what profiling costs").
#
# The default load keeps the server busy enough (a fifth of a core or more) that its CPU time, counted in
# 10 ms ticks, resolves a few percent in a window; echo at a few hundred per second does not.
#
#   bash scripts/studies/profile-overhead.sh     # PAIRS=5 RATE=40 DURATION=6 MIX=upload:1 SIZES=1MiB
#   MIX=echo:1 RATE=1000 bash scripts/studies/profile-overhead.sh
source "$(dirname "$0")/lib.sh"
PAIRS=${PAIRS:-5}
RATE=${RATE:-40}
DURATION=${DURATION:-6}
MIX=${MIX:-upload:1}
SIZES=${SIZES:-1MiB}
SERVERS=${SERVERS:-xferd-c xferd-go}
XB="$BENCH_ROOT/.venv/bin/python -m xferbench"

experiment() { # SERVER FLAGS_TOML
  cat <<TOML
[experiment]
name = "profile-overhead"
repeats = 1
duet = false
warmup_s = 2
[load]
transport = "frame"
rate = "$RATE"
users = 8
spawn_rate = 8
duration_s = $DURATION
mix = "$MIX"
sizes = "$SIZES"
chunk = "256KiB"
[[servers]]
server = "$1"
[servers.flags]
$2
TOML
}

figure() { # RUN_DIR FIELD
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); v=r.get(sys.argv[2]); assert r["status"]=="ok", r["error"]; print(v)' \
    "$1/runs.jsonl" "$2"
}

for server in $SERVERS; do
  if [ "$server" = xferd-c ]; then flags='alloc = "glibc"'; else flags='pool = "on"'; fi
  experiment "$server" "$flags" >"$BENCH_TMP/$server.toml"
  cpu=() p50=() samples=()
  for i in $(seq 1 "$PAIRS"); do
    # Alternate which goes first, so a drift of the machine's load does not favour one side.
    if [ $((i % 2)) -eq 1 ]; then order="off on"; else order="on off"; fi
    for side in $order; do
      extra=(); [ "$side" = on ] && extra=(--profile)
      (cd "$BENCH_ROOT" && $XB run "$BENCH_TMP/$server.toml" "${extra[@]}" --out "$BENCH_TMP/$server.$side.$i" >/dev/null 2>&1)
    done
    off=$BENCH_TMP/$server.off.$i on=$BENCH_TMP/$server.on.$i
    cpu+=("$(ratio "$(figure "$on" server_cpu_per_request_s)" "$(figure "$off" server_cpu_per_request_s)")")
    p50+=("$(ratio "$(figure "$on" client_p50_s)" "$(figure "$off" client_p50_s)")")
    samples+=("$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["cpu_profile"]["samples"])' "$on/runs.jsonl")")
  done
  echo "$server $MIX ($SIZES) at $RATE/s, $PAIRS pairs of ${DURATION}s windows: profiled/unprofiled" \
       "server CPU per request median $(median "${cpu[@]}") (pairs: ${cpu[*]})," \
       "client P50 median $(median "${p50[@]}") (pairs: ${p50[*]}); samples per window: ${samples[*]}"
done
