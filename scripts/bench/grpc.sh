#!/usr/bin/env bash
# xferd-go's gRPC path against its two references (issue 12; BENCHMARKS.md):
#   (a) Echo, ghz c=16, 256 B payloads, ECHO_SECONDS each, on bare-echo (grpc-go with nothing of ours) and on
#       xferd-go: ratio = xferd-go rps / bare-echo rps;
#   (b) Upload (client stream: header, 8 x 1 MiB chunks, trailer; c=4) and Download (server stream of that
#       stored 8 MiB file, 1 MiB chunks; c=4) on xferd-go, XFER_SECONDS each: MB/s / the iperf3 loopback ceiling
#       (1 MiB writes) measured in the same round.
# ROUNDS rounds, the servers' order alternating per round; medians over rounds. BEFORE=/path/to/xferd-go adds a
# second xferd-go (e.g. main's) measured the same way in the same rounds, for before/after. Servers run on
# SERVER_CPUS, ghz and iperf3's client on GEN_CPUS; each ghz run's own CPU (cores used) is printed so a
# saturated generator shows. GHZ_ARGS passes extra ghz flags (e.g. "--cpus 1"). PROFILE_DIR=dir saves a 5 s
# CPU profile and an allocs profile of xferd-go under each load into dir (last round).
#
#   make build bench-tools && ROUNDS=3 bash scripts/bench/grpc.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=${ROUNDS:-3}
ECHO_SECONDS=${ECHO_SECONDS:-8}
XFER_SECONDS=${XFER_SECONDS:-8}
IPERF_SECONDS=${IPERF_SECONDS:-4}
BEFORE=${BEFORE:-}
GHZ_ARGS=${GHZ_ARGS:-}
PROFILE_DIR=${PROFILE_DIR:-}
GHZ=$BENCH_BIN/ghz
PY=$BENCH_ROOT/.venv/bin/python
FILE_MIB=8

need "$GHZ" "make bench-tools"
need "$BENCH_BIN/bare-echo" "make build"
need "$BENCH_BIN/xferd-go" "make build"
[ -x "$PY" ] || { echo "missing $PY: make setup" >&2; exit 2; }

# The ghz inputs: one Echo request (JSON), and the Upload stream as count-delimited binary messages (ghz sends
# each in turn; 11 MiB of JSON base64 would make ghz, not the server, the cost).
PYTHONPATH=$BENCH_ROOT "$PY" - "$BENCH_TMP" "$FILE_MIB" <<'PYEOF'
import base64, json, os, sys, zlib
from google.protobuf.internal.encoder import _VarintBytes
from xfer.v1 import file_transfer_pb2 as pb
out, mib = sys.argv[1], int(sys.argv[2])
json.dump({"payload": base64.b64encode(os.urandom(256)).decode()}, open(f"{out}/echo.json", "w"))
# ghz reads its data as a Go template: no "{{" may appear, so the content has no "{" at all.
chunk = os.urandom(1 << 20).replace(b"{", b"z")
msgs = [pb.UploadRequest(header=pb.UploadHeader(name="bench-8m", size=mib << 20, chunk_size=1 << 20))]
msgs += [pb.UploadRequest(chunk=chunk)] * mib
msgs.append(pb.UploadRequest(trailer=pb.UploadTrailer(crc32=zlib.crc32(chunk * mib))))
with open(f"{out}/upload.bin", "wb") as f:
    for m in msgs:
        b = m.SerializeToString()
        f.write(_VarintBytes(len(b)) + b)
assert b"{{" not in open(f"{out}/upload.bin", "rb").read(), "upload.bin would be read as a template"
PYEOF
PROTO=(--insecure --proto "$BENCH_ROOT/proto/xfer/v1/file_transfer.proto" --import-paths "$BENCH_ROOT/proto")

# ghz_run NAME ARGS...: run ghz on the generator CPUs; leaves $BENCH_TMP/NAME.json and sets GHZ_CORES (ghz's
# user+system CPU over its wall time).
ghz_run() {
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086 # GHZ_ARGS is a list of flags
  (on_gen "$GHZ" "${PROTO[@]}" --format json $GHZ_ARGS "$@" >"$BENCH_TMP/$name.json"; times >"$BENCH_TMP/$name.times")
  t1=$(date +%s.%N)
  GHZ_CORES=$(awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" 'NR == 2 {
      split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.2f\n", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) / w }' \
    "$BENCH_TMP/$name.times")
}

# ghz_field NAME rps|mbps: requests per second, or MB/s of OK calls moving FILE_MIB MiB each.
ghz_field() {
  "$PY" - "$BENCH_TMP/$1.json" "$2" "$FILE_MIB" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
codes = r.get("statusCodeDistribution", {})
ok = codes.get("OK", 0)
# ghz -z ends with the calls still in flight cut off (Canceled / Unavailable, at most one per worker); any other
# failure, or more than the workers, is a broken run.
cut = codes.get("Canceled", 0) + codes.get("Unavailable", 0)
bad = {k: v for k, v in codes.items() if k not in ("OK", "Canceled", "Unavailable")}
if bad or ok == 0 or cut > r["options"]["concurrency"]:
    sys.exit(f"ghz {sys.argv[1]}: {ok} OK, others {bad}, errors {r.get('errorDistribution')}")
secs = r["total"] / 1e9
print(round(ok / secs) if sys.argv[2] == "rps" else round(ok * (int(sys.argv[3]) << 20) / secs / 1e6))
PYEOF
}

# profile NAME SECONDS: CPU and allocs profiles of the running xferd-go into PROFILE_DIR, in the background.
profile() {
  [ -n "$PROFILE_DIR" ] || return 0
  local m
  m=$(ready_field metrics)
  mkdir -p "$PROFILE_DIR"
  (sleep 1; curl -fsS -o "$PROFILE_DIR/$1.cpu.pb.gz" "http://$m/debug/pprof/profile?seconds=$2"
   curl -fsS -o "$PROFILE_DIR/$1.allocs.pb.gz" "http://$m/debug/pprof/allocs") &
  PROF_PID=$!
}

xferd_args=(--grpc-addr 127.0.0.1:0 --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0)

# echo_on LABEL BIN ARGS...: Echo rps of one server; prints "rps ghz_cores server_cores".
echo_on() {
  local label=$1; shift
  start_server "$BENCH_TMP/$label.log" "$@"
  local c0; c0=$(cpu_seconds "$SERVER_PID")
  local last=$(( r == ROUNDS ))
  PROF_PID=
  if [ "$last" = 1 ] && [ "$label" != bare ]; then profile "echo-$label" $(( ECHO_SECONDS - 2 )); fi
  ghz_run "echo-$label" --call xfer.v1.FileTransfer.Echo -D "$BENCH_TMP/echo.json" -c 16 -z "${ECHO_SECONDS}s" \
    "$(ready_field grpc)"
  [ -z "$PROF_PID" ] || wait "$PROF_PID"
  local c1; c1=$(cpu_seconds "$SERVER_PID")
  stop_server
  echo "$(ghz_field "echo-$label" rps) $GHZ_CORES $(awk -v a="$c0" -v b="$c1" -v s="$ECHO_SECONDS" 'BEGIN{printf "%.2f", (b-a)/s}')"
}

# xfer_on LABEL BIN: Upload then Download MB/s of one xferd-go; prints "up down ghz_up_cores ghz_down_cores".
xfer_on() {
  local label=$1 bin=$2
  start_server "$BENCH_TMP/$label.log" "$bin" "${xferd_args[@]}"
  local g; g=$(ready_field grpc)
  local last=$(( r == ROUNDS ))
  PROF_PID=
  [ "$last" = 0 ] || profile "upload-$label" $(( XFER_SECONDS - 2 ))
  ghz_run "up-$label" --call xfer.v1.FileTransfer.Upload -B "$BENCH_TMP/upload.bin" -c 4 -z "${XFER_SECONDS}s" "$g"
  [ -z "$PROF_PID" ] || wait "$PROF_PID"
  local up_cores=$GHZ_CORES
  PROF_PID=
  [ "$last" = 0 ] || profile "download-$label" $(( XFER_SECONDS - 2 ))
  ghz_run "down-$label" --call xfer.v1.FileTransfer.Download -d '{"name":"bench-8m"}' -c 4 -z "${XFER_SECONDS}s" "$g"
  [ -z "$PROF_PID" ] || wait "$PROF_PID"
  stop_server
  echo "$(ghz_field "up-$label" mbps) $(ghz_field "down-$label" mbps) $up_cores $GHZ_CORES"
}

labels=(after)
[ -z "$BEFORE" ] || labels+=(before)
bin_of() { if [ "$1" = before ]; then echo "$BEFORE"; else echo "$BENCH_BIN/xferd-go"; fi; }
declare -A echo_ratio=() up_ratio=() down_ratio=()
for r in $(seq 1 "$ROUNDS"); do
  # Alternate the order each round so neither server always runs on the warmer (or noisier) side.
  order=(bare "${labels[@]}")
  if (( r % 2 == 0 )); then order=("${labels[@]}" bare); fi
  declare -A rps=()
  for s in "${order[@]}"; do
    if [ "$s" = bare ]; then read -r v gc sc < <(echo_on bare "$BENCH_BIN/bare-echo" --grpc-addr 127.0.0.1:0)
    else read -r v gc sc < <(echo_on "$s" "$(bin_of "$s")" "${xferd_args[@]}"); fi
    rps[$s]=$v
    echo "round $r echo $s: $v rps (ghz ${gc} cores, server ${sc} cores)"
  done
  ceiling=$(iperf3_mbps "$IPERF_SECONDS")
  echo "round $r iperf3 loopback ceiling: $ceiling MB/s"
  for s in "${labels[@]}"; do
    read -r up down guc gdc < <(xfer_on "$s" "$(bin_of "$s")")
    echo_ratio[$s]+="$(ratio "${rps[$s]}" "${rps[bare]}") "
    up_ratio[$s]+="$(ratio "$up" "$ceiling") "
    down_ratio[$s]+="$(ratio "$down" "$ceiling") "
    echo "round $r $s: upload $up MB/s (ghz ${guc} cores), download $down MB/s (ghz ${gdc} cores)"
  done
done
for s in "${labels[@]}"; do
  # shellcheck disable=SC2086 # space-separated lists of figures
  echo "median over $ROUNDS rounds, xferd-go $s: echo/bare $(median ${echo_ratio[$s]})," \
    "upload/iperf3 $(median ${up_ratio[$s]}), download/iperf3 $(median ${down_ratio[$s]})"
done
