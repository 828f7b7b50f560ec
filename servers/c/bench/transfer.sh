#!/usr/bin/env bash
# Transfer benchmark of one or more xferd-c binaries, alternated A/B/A/B on the same machine in one sitting:
# for each round and each binary, start it with a disk store in a fresh temp dir, then run xferd-c-bench
# upload (64 MiB files in 1 MiB chunks), read of the stored files, read of gen: content, and echo, each for
# SECONDS_PER_RUN, and print per run: MB/s and the server's CPU (utime+stime from /proc/PID/stat) per GiB
# moved or per 1000 calls. Usage: transfer.sh BIN [BIN...]   Env: ROUNDS (3), SECONDS_PER_RUN (5),
# CONNS (2), DEPTH (4), CHUNK (1048576), FILE_SIZE (67108864), ALLOC (glibc), STORE (disk; or mem).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
bench=$root/build/bin/xferd-c-bench
rounds=${ROUNDS:-3}; secs=${SECONDS_PER_RUN:-5}; conns=${CONNS:-2}; depth=${DEPTH:-4}
chunk=${CHUNK:-1048576}; fsize=${FILE_SIZE:-67108864}; alloc=${ALLOC:-glibc}; store=${STORE:-disk}
tck=$(getconf CLK_TCK)
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -TERM $pid 2>/dev/null; rm -rf "$tmp"' EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

measure() { # label bin frame args...
  local label=$1 bin=$2 frame=$3; shift 3
  local c0 c1 out
  c0=$(cpu_ticks "$pid")
  out=$("$bench" --addr "$frame" --seconds "$secs" "$@") || true
  c1=$(cpu_ticks "$pid")
  awk -v l="$label" -v b="$bin" -v o="$out" -v t=$((c1 - c0)) -v hz="$tck" 'BEGIN {
    n = split(o, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], p, "="); f[p[1]] = p[2] }
    cpu = t / hz; gib = f["mb_per_s"] * 1e6 * '"$secs"' / 1073741824
    per = gib > 0.01 ? sprintf("cpu_s_per_gib=%.3f", cpu / gib) : sprintf("cpu_ms_per_call=%.4f", cpu * 1000 / f["calls"])
    printf "%-8s %-28s MB/s=%-8s calls/s=%-7s p50_us=%-6s p99_us=%-7s server_cpu_s=%.2f %s errors=%s\n",
      l, b, f["mb_per_s"], f["calls_per_s"], f["p50_us"], f["p99_us"], cpu, per, f["errors"] }'
}

for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    dir=$tmp/store-$r-$(basename "$bin"); mkdir -p "$dir"
    spec=$([ "$store" = mem ] && echo mem || echo "disk:$dir")
    "$bin" --alloc "$alloc" --store "$spec" --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 1 200); do grep -q ' ready ' "$tmp/err" && break; sleep 0.05; done
    line=$(grep ' ready ' "$tmp/err") || { cat "$tmp/err"; exit 1; }
    frame=$(sed -E 's/.* frame=([^ ]+).*/\1/' <<<"$line")
    measure upload "$bin" "$frame" --method upload --conns "$conns" --depth "$depth" --size "$chunk" --file-size "$fsize"
    measure read "$bin" "$frame" --method read --conns "$conns" --depth "$depth" --size "$chunk" --file-size "$fsize" --name bench-0-0
    measure gen "$bin" "$frame" --method read --conns "$conns" --depth "$depth" --size "$chunk" --file-size "$fsize"
    measure echo256 "$bin" "$frame" --method echo --conns "$conns" --depth 16 --size 256
    kill -TERM $pid; wait $pid || true; pid=
    rm -rf "$dir"
  done
done
