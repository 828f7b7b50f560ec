#!/usr/bin/env bash
# The latency of one 64-byte allocation per allocator (the C memory-pool report's measure), side by side in
# one run: for each thread count, ROUNDS interleaved rounds of every allocator (build/bin/xferd-c-allocbench,
# one process per cell), the median of each percentile over the rounds, and P99 as a ratio to glibc's at
# the same thread count. Bounded: OPS allocations per thread per cell, each cell capped at CELL_SECONDS.
# Env: THREADS ("1 2 4"), ALLOCS ("glibc jemalloc tcmalloc mimalloc pool"), CROSS (0.25: the fraction of
# frees done by another thread), LIVE (256 blocks kept alive per thread), OPS (200000), ROUNDS (3),
# CELL_SECONDS (10).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=../../../scripts/studies/lib.sh
source "$root/scripts/studies/lib.sh"
bench=$root/build/bin/xferd-c-allocbench
[[ -x $bench ]] || { echo "allocbench: $bench missing: make -C servers/c allocbench" >&2; exit 1; }
threads=${THREADS:-"1 2 4"}
allocs=${ALLOCS:-"glibc jemalloc tcmalloc mimalloc pool"}
cross=${CROSS:-0.25}
live=${LIVE:-256}
ops=${OPS:-200000}
rounds=${ROUNDS:-3}
cell_s=${CELL_SECONDS:-10}

field() { sed -E "s/.* $2=([^ ]+).*/\\1/" <<<"$1"; }
declare -A p50 p99 p999 fails xfree contended timer
for t in $threads; do
  for ((r = 1; r <= rounds; r++)); do
    for a in $allocs; do
      line=$("$bench" --alloc "$a" --threads "$t" --cross "$cross" --live "$live" --ops "$ops" --seconds "$cell_s")
      k="$a/$t"
      p50[$k]+=" $(field "$line" p50_ns)"; p99[$k]+=" $(field "$line" p99_ns)"; p999[$k]+=" $(field "$line" p999_ns)"
      fails[$k]=$(( ${fails[$k]:-0} + $(field "$line" failures) ))
      xfree[$k]=$(( ${xfree[$k]:-0} + $(field "$line" cross_frees) ))
      c=$(field "$line" lock_contended); [[ $c == n/a ]] && contended[$k]=n/a || contended[$k]=$(( ${contended[$k]:-0} + c ))
      timer[$k]+=" $(field "$line" timer_ns)"
    done
  done
done

echo "64-byte allocations: cross=$cross live=$live ops=$ops/thread rounds=$rounds (median over rounds; ns net of the timer)"
printf '| threads | allocator | P50 ns | P99 ns | P99.9 ns | P99 ÷ glibc | failures | cross-thread frees | pool lock waits | timer ns |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for t in $threads; do
  # shellcheck disable=SC2086
  base=$(median ${p99[glibc/$t]:-${p99[${allocs%% *}/$t]}})
  for a in $allocs; do
    k="$a/$t"
    # shellcheck disable=SC2086
    m99=$(median ${p99[$k]})
    # shellcheck disable=SC2086
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$a" "$(median ${p50[$k]})" "$m99" \
      "$(median ${p999[$k]})" "$(ratio "$m99" "$base")" "${fails[$k]}" "${xfree[$k]}" "${contended[$k]}" \
      "$(median ${timer[$k]})"
  done
done
