#!/usr/bin/env bash
# xferd-go's gRPC path against its two references (BENCHMARKS.md):
#   (a) Echo, ghz c=16, 256 B payloads, ECHO_SECONDS each, on bare-echo (grpc-go with nothing of ours) and on
#       xferd-go: ratio = xferd-go rps / bare-echo rps;
#   (b) Upload (client stream: header, 8 x 1 MiB chunks, trailer; c=4) and Download (server stream of that
#       stored 8 MiB file, 1 MiB chunks; c=4) on xferd-go, XFER_SECONDS each: MB/s / the iperf3 loopback ceiling
#       (1 MiB writes) measured in the same round.
# ROUNDS rounds, the servers' order alternating per round; medians over rounds. BEFORE=/path/to/xferd-go adds a
# second xferd-go (e.g. main's) measured the same way in the same rounds, for before/after. Servers run on
# SERVER_CPUS, ghz and iperf3's client on GEN_CPUS; each ghz run's own CPU (cores used) is printed so a
# saturated generator shows. GHZ_ARGS passes extra ghz flags (e.g. "--cpus 1"). PROFILE_DIR=dir saves a 5 s
# CPU profile and an allocs profile of xferd-go under each load into dir (last round). XFERD_ARGS adds flags to
# the (after) xferd-go only, to compare a setting with its default (e.g. "--grpc-write-buffer-size 256K").
# Besides the throughput ratios it prints the server's own CPU per unit of work (/proc, user+system): per Echo
# call, and per GB moved. On a loaded machine a starved generator moves the throughput ratios; the CPU per
# unit is what our code costs, whoever else is running.
#
#   make build && ROUNDS=3 bash scripts/studies/grpc.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=${ROUNDS:-3}
ECHO_SECONDS=${ECHO_SECONDS:-8}
XFER_SECONDS=${XFER_SECONDS:-8}
IPERF_SECONDS=${IPERF_SECONDS:-4}
BEFORE=${BEFORE:-}
GHZ_ARGS=${GHZ_ARGS:-}
PROFILE_DIR=${PROFILE_DIR:-}
read -r -a XFERD_EXTRA <<<"${XFERD_ARGS:-}"
GHZ=$BENCH_BIN/ghz
PY=$BENCH_ROOT/.venv/bin/python
FILE_MIB=8

need "$GHZ" "make build"
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
# ghz -z ends with the calls still in flight cut off (Canceled / Unavailable, about one per worker; a client
# stream cut mid-send can count twice); any other failure, or many more cut calls, is a broken run.
cut = codes.get("Canceled", 0) + codes.get("Unavailable", 0)
bad = {k: v for k, v in codes.items() if k not in ("OK", "Canceled", "Unavailable")}
if bad or ok == 0 or cut > 2 * r["options"]["concurrency"]:
    sys.exit(f"ghz {sys.argv[1]}: {ok} OK, {cut} cut off at the end, others {bad}, errors {r.get('errorDistribution')}")
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

# per_unit CPU0 CPU1 UNITS SCALE: server CPU seconds between two readings per unit, times SCALE.
per_unit() { awk -v a="$1" -v b="$2" -v n="$3" -v k="$4" 'BEGIN { printf "%.2f", (n > 0 ? (b - a) / n * k : 0) }'; }

# echo_on LABEL BIN ARGS...: Echo rps of one server; prints "rps ghz_cores server_cores server_cpu_us_per_call".
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
  local rps; rps=$(ghz_field "echo-$label" rps)
  echo "$rps $GHZ_CORES $(per_unit "$c0" "$c1" "$ECHO_SECONDS" 1) $(per_unit "$c0" "$c1" $(( rps * ECHO_SECONDS )) 1e6)"
}

# xfer_on LABEL BIN ARGS...: Upload then Download MB/s of one xferd-go; prints "up down ghz_up_cores
# ghz_down_cores server_cpu_s_per_GB_up server_cpu_s_per_GB_down".
xfer_on() {
  local label=$1 bin=$2; shift 2
  start_server "$BENCH_TMP/$label.log" "$bin" "${xferd_args[@]}" "$@"
  local g; g=$(ready_field grpc)
  local last=$(( r == ROUNDS ))
  PROF_PID=
  [ "$last" = 0 ] || profile "upload-$label" $(( XFER_SECONDS - 2 ))
  local c0 c1 c2
  c0=$(cpu_seconds "$SERVER_PID")
  ghz_run "up-$label" --call xfer.v1.FileTransfer.Upload -B "$BENCH_TMP/upload.bin" -c 4 -z "${XFER_SECONDS}s" "$g"
  [ -z "$PROF_PID" ] || wait "$PROF_PID"
  local up_cores=$GHZ_CORES
  c1=$(cpu_seconds "$SERVER_PID")
  PROF_PID=
  [ "$last" = 0 ] || profile "download-$label" $(( XFER_SECONDS - 2 ))
  ghz_run "down-$label" --call xfer.v1.FileTransfer.Download -d '{"name":"bench-8m"}' -c 4 -z "${XFER_SECONDS}s" "$g"
  [ -z "$PROF_PID" ] || wait "$PROF_PID"
  c2=$(cpu_seconds "$SERVER_PID")
  stop_server
  local up down
  up=$(ghz_field "up-$label" mbps); down=$(ghz_field "down-$label" mbps)
  echo "$up $down $up_cores $GHZ_CORES $(per_unit "$c0" "$c1" $(( up * XFER_SECONDS )) 1000)" \
    "$(per_unit "$c1" "$c2" $(( down * XFER_SECONDS )) 1000)"
}

labels=(after)
[ -z "$BEFORE" ] || labels+=(before)
bin_of() { if [ "$1" = before ]; then echo "$BEFORE"; else echo "$BENCH_BIN/xferd-go"; fi; }
# extra_of LABEL: the extra flags of that server (XFERD_ARGS for after, none for before).
extra_of() { if [ "$1" = after ] && [ "${#XFERD_EXTRA[@]}" -gt 0 ]; then printf '%s\n' "${XFERD_EXTRA[@]}"; fi; }
declare -A echo_ratio=() echo_cpu=() up_ratio=() down_ratio=() up_cpu=() down_cpu=()
for r in $(seq 1 "$ROUNDS"); do
  # Alternate the order each round so neither server always runs on the warmer (or noisier) side.
  order=(bare "${labels[@]}")
  if (( r % 2 == 0 )); then order=("${labels[@]}" bare); fi
  declare -A rps=() cpu_us=()
  for s in "${order[@]}"; do
    if [ "$s" = bare ]; then read -r v gc sc us < <(echo_on bare "$BENCH_BIN/bare-echo" --grpc-addr 127.0.0.1:0)
    else
      mapfile -t extra < <(extra_of "$s")
      read -r v gc sc us < <(echo_on "$s" "$(bin_of "$s")" "${xferd_args[@]}" "${extra[@]}")
    fi
    rps[$s]=$v; cpu_us[$s]=$us
    echo "round $r echo $s: $v rps (ghz ${gc} cores, server ${sc} cores, server ${us} us CPU per call)"
  done
  ceiling=$(iperf3_mbps "$IPERF_SECONDS")
  echo "round $r iperf3 loopback ceiling: $ceiling MB/s"
  for s in "${labels[@]}"; do
    mapfile -t extra < <(extra_of "$s")
    read -r up down guc gdc ucpu dcpu < <(xfer_on "$s" "$(bin_of "$s")" "${extra[@]}")
    echo_ratio[$s]+="$(ratio "${rps[$s]}" "${rps[bare]}") "
    echo_cpu[$s]+="$(ratio "${cpu_us[$s]}" "${cpu_us[bare]}") "
    up_cpu[$s]+="$ucpu "
    down_cpu[$s]+="$dcpu "
    up_ratio[$s]+="$(ratio "$up" "$ceiling") "
    down_ratio[$s]+="$(ratio "$down" "$ceiling") "
    echo "round $r $s: upload $up MB/s (ghz ${guc} cores, server ${ucpu} CPU s/GB)," \
      "download $down MB/s (ghz ${gdc} cores, server ${dcpu} CPU s/GB)"
  done
done
for s in "${labels[@]}"; do
  # shellcheck disable=SC2086 # space-separated lists of figures
  echo "median over $ROUNDS rounds, xferd-go $s: echo rps/bare $(median ${echo_ratio[$s]})," \
    "echo CPU per call/bare $(median ${echo_cpu[$s]}), upload/iperf3 $(median ${up_ratio[$s]})" \
    "($(median ${up_cpu[$s]}) CPU s/GB), download/iperf3 $(median ${down_ratio[$s]}) ($(median ${down_cpu[$s]}) CPU s/GB)"
done
