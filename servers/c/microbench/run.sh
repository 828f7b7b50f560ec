#!/usr/bin/env bash
# Request-path micro-benchmark per allocator: for each --alloc, start build/bin/xferd-c
# (--io-threads 1 --workers 1, so every call's buffers cross threads), run a small-message echo
# storm and a 1 MiB echo storm with build/bin/xferd-c-bench, scrape the allocator gauges, stop.
# Prints one row per allocator and the ratio to glibc. Short on purpose (shared 2-core machine).
# Env: SECONDS_PER_RUN (3), SMALL_SIZE (64), LARGE_SIZE (1048576), ALLOCS ("glibc jemalloc tcmalloc mimalloc pool").
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
bin=$root/build/bin
secs=${SECONDS_PER_RUN:-3}
small=${SMALL_SIZE:-64}
large=${LARGE_SIZE:-1048576}
allocs=${ALLOCS:-"glibc jemalloc tcmalloc mimalloc pool"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

declare -A sm lg rss
for a in $allocs; do
  "$bin/xferd-c" --alloc "$a" --frame-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 \
    --io-threads 1 --workers 1 2>"$tmp/err.$a" &
  pid=$!
  for _ in $(seq 1 100); do grep -q ' ready ' "$tmp/err.$a" && break; sleep 0.05; done
  line=$(grep ' ready ' "$tmp/err.$a") || { cat "$tmp/err.$a"; kill $pid; exit 1; }
  frame=$(sed -E 's/.* frame=([^ ]+).*/\1/' <<<"$line")
  metrics=$(sed -E 's/.* metrics=([^ ]+).*/\1/' <<<"$line")
  sm[$a]=$("$bin/xferd-c-bench" --addr "$frame" --conns 2 --depth 16 --size "$small" --seconds "$secs")
  lg[$a]=$("$bin/xferd-c-bench" --addr "$frame" --conns 2 --depth 2 --size "$large" --seconds "$secs")
  rss[$a]=$(curl -s "http://$metrics/metrics" | awk '/^process_resident_memory_bytes/ {printf "%.1f", $2/1048576}')
  kill -TERM $pid; wait $pid
done

field() { sed -E "s/.*$2=([^ ]+).*/\1/" <<<"$1"; }
base_s=$(field "${sm[glibc]:-${sm[${allocs%% *}]}}" calls_per_s)
base_l=$(field "${lg[glibc]:-${lg[${allocs%% *}]}}" calls_per_s)
printf '%-9s %14s %8s %9s %9s | %14s %8s %9s %9s | %8s\n' alloc "small calls/s" ratio p50_us p99_us \
  "1MiB calls/s" ratio p50_us p99_us rss_MiB
for a in $allocs; do
  s=$(field "${sm[$a]}" calls_per_s); l=$(field "${lg[$a]}" calls_per_s)
  printf '%-9s %14s %8.2f %9s %9s | %14s %8.2f %9s %9s | %8s\n' "$a" "$s" "$(echo "$s / $base_s" | bc -l)" \
    "$(field "${sm[$a]}" p50_us)" "$(field "${sm[$a]}" p99_us)" "$l" "$(echo "$l / $base_l" | bc -l)" \
    "$(field "${lg[$a]}" p50_us)" "$(field "${lg[$a]}" p99_us)" "${rss[$a]}"
done
