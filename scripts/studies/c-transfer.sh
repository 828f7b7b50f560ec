#!/usr/bin/env bash
# Transfer benchmark of xferd-c configurations, alternated A/B/A/B in one sitting, server and generator pinned
# (lib.sh: the server on SERVER_CPUS, xferd-c-bench on GEN_CPUS). For each round and each configuration, start
# it with a store in a fresh temp dir, then run xferd-c-bench for SECONDS_PER_RUN per path:
#   upload   64 MiB files in 1 MiB chunks (CONNS connections x DEPTH in flight)
#   read     Reads of a file the upload stored
#   gen      Reads of gen: content of the same size
#   echo256  256-byte Echoes (CONNS x 16 in flight)
# and print per run MB/s, calls/s and the server's CPU (utime+stime) per GiB moved or per 1000 calls; at the
# end, per path, the medians and the median of the per-round ratios of each configuration to the first.
#
# Usage: c-transfer.sh CONFIG [CONFIG...]   where CONFIG is "BIN [FLAGS...]" (one word list), e.g.
#   c-transfer.sh /tmp/before/build/bin/xferd-c build/bin/xferd-c
#   PATHS="echo256 upload" c-transfer.sh "build/bin/xferd-c --metrics off" "build/bin/xferd-c --metrics on"
# Env: ROUNDS (3), SECONDS_PER_RUN (5), CONNS (2), DEPTH (4), CHUNK (1048576), FILE_SIZE (67108864),
#   ALLOC (glibc), STORE (disk; or mem), PATHS ("upload read gen echo256"; read needs upload before it),
#   PERF_DIR (set: `perf record -e cpu-clock -g` of the server during every run, kept there, and its top five
#   symbols printed), SERVER_CPUS / GEN_CPUS (lib.sh).
source "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
rounds=${ROUNDS:-3}; secs=${SECONDS_PER_RUN:-5}; conns=${CONNS:-2}; depth=${DEPTH:-4}
chunk=${CHUNK:-1048576}; fsize=${FILE_SIZE:-67108864}; alloc=${ALLOC:-glibc}; store=${STORE:-disk}
paths=${PATHS:-"upload read gen echo256"}
bench=$BENCH_BIN/xferd-c-bench
need xferd-c-bench "make -C servers/c $BENCH_BIN/xferd-c-bench"
[ -z "${PERF_DIR:-}" ] || { need perf "apt-get install linux-perf"; mkdir -p "$PERF_DIR"; }
for cfg in "$@"; do read -ra words <<<"$cfg"; [ -x "${words[0]}" ] || { echo "not an executable: ${words[0]}" >&2; exit 2; }; done

declare -A thr cost   # [path,config,round]: calls/s or MB/s; server CPU s per GiB or ms per 1000 calls

# top5 FILE: the five symbols with the most server samples, "share symbol" each.
top5() {
  perf report -i "$1" --no-children --sort symbol --stdio -g none 2>/dev/null |
    awk '/^ *[0-9.]+%/ && n++ < 5 { printf "%s %s\n", $1, $3 }'
}

# bench_args PATH: xferd-c-bench's flags for that path.
bench_args() {
  case $1 in
  upload) echo --method upload --conns "$conns" --depth "$depth" --size "$chunk" --file-size "$fsize" ;;
  read) echo --method read --conns "$conns" --depth "$depth" --size "$chunk" --file-size "$fsize" --name bench-0-0 ;;
  gen) echo --method read --conns "$conns" --depth "$depth" --size "$chunk" --file-size "$fsize" ;;
  echo256) echo --method echo --conns "$conns" --depth 16 --size 256 ;;
  *) echo "unknown path $1 (upload, read, gen, echo256)" >&2; exit 2 ;;
  esac
}

# measure PATH K ROUND: one run against the server started last; prints its row and keeps its figures.
measure() {
  local path=$1 k=$2 r=$3 c0 c1 out ppid=
  local -a args
  read -ra args <<<"$(bench_args "$path")"
  if [ -n "${PERF_DIR:-}" ]; then
    on_gen perf record -q -e cpu-clock -g -p "$SERVER_PID" -o "$PERF_DIR/$k-$path-r$r.data" -- sleep "$secs" \
      >/dev/null 2>&1 &
    ppid=$!
  fi
  c0=$(cpu_seconds "$SERVER_PID")
  out=$(on_gen "$bench" --addr "$(ready_field frame)" --seconds "$secs" "${args[@]}") || true
  c1=$(cpu_seconds "$SERVER_PID")
  [ -z "$ppid" ] || wait "$ppid" || true
  local row
  row=$(awk -v o="$out" -v cpu="$(awk -v a="$c0" -v b="$c1" 'BEGIN{print b - a}')" -v secs="$secs" -v path="$path" 'BEGIN {
    n = split(o, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], p, "="); f[p[1]] = p[2] }
    gib = f["mb_per_s"] * 1e6 * secs / 1073741824
    if (path != "echo256") { thr = f["mb_per_s"]; cost = cpu / gib; unit = "cpu_s_per_gib" }
    else { thr = f["calls_per_s"]; cost = f["calls"] > 0 ? cpu * 1e6 / f["calls"] : 0; unit = "cpu_ms_per_1000" }
    printf "%s %.4f %s MB/s=%s calls/s=%s p50_us=%s p99_us=%s server_cpu_s=%.2f %s=%.4f errors=%s\n",
      thr, cost, unit, f["mb_per_s"], f["calls_per_s"], f["p50_us"], f["p99_us"], cpu, unit, cost, f["errors"] }')
  read -r thr["$path,$k,$r"] cost["$path,$k,$r"] _ rest <<<"$row"
  printf 'round %d  %-8s config %d  %s\n' "$r" "$path" "$k" "$rest"
  [ -z "$ppid" ] || top5 "$PERF_DIR/$k-$path-r$r.data" | sed 's/^/    perf /'
}

for r in $(seq 1 "$rounds"); do
  k=0
  for cfg in "$@"; do
    k=$((k + 1))
    read -ra words <<<"$cfg"
    dir=$BENCH_TMP/store-$r-$k; mkdir -p "$dir"
    spec=$([ "$store" = mem ] && echo mem || echo "disk:$dir")
    start_server "$BENCH_TMP/err-$r-$k" "${words[@]}" --alloc "$alloc" --store "$spec" \
      --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0
    for path in $paths; do measure "$path" "$k" "$r"; done
    stop_server
    rm -rf "$dir"
  done
done

echo
echo "medians of $rounds rounds (server CPUs $SERVER_CPUS, generator CPUs $GEN_CPUS); ratio: config k / config 1, per round, then the median"
k=0
for cfg in "$@"; do k=$((k + 1)); echo "config $k: $cfg"; done
printf '%-8s %-6s %12s %14s %14s %14s\n' path config "MB/s|calls/s" "cpu per unit" "thr ratio" "cpu ratio"
for path in $paths; do
  for k in $(seq 1 $#); do
    t=(); c=(); tr=(); cr=()
    for r in $(seq 1 "$rounds"); do
      t+=("${thr[$path,$k,$r]}"); c+=("${cost[$path,$k,$r]}")
      tr+=("$(ratio "${thr[$path,$k,$r]}" "${thr[$path,1,$r]}")"); cr+=("$(ratio "${cost[$path,$k,$r]}" "${cost[$path,1,$r]}")")
    done
    printf '%-8s %-6s %12s %14s %14s %14s\n' "$path" "$k" "$(median "${t[@]}")" "$(median "${c[@]}")" \
      "$(median "${tr[@]}") " "$(median "${cr[@]}")"
    [ "$k" = 1 ] || printf '%-8s %-6s %12s %14s %14s %14s\n' "" "" "" "" "(${tr[*]})" "(${cr[*]})"
  done
done
