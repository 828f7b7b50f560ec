#!/usr/bin/env bash
# `make test` (fast) and `make test-slow` (slow): every phase runs, each is timed, and a table at the end says
# how long each took and which failed. The exit status is non-zero when any phase failed. Setup, build and the
# container images are done by make before this script and timed apart (bootstrap, build and containers each
# print their own time).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The Go toolchain the set-up links as build/go where the machine's is too old, as the Makefile puts it first on
# PATH: the tests that regenerate code run `go` themselves, and this script may be run without make.
export PATH="$root/build/go/bin:$PATH"
suite=${1:?usage: scripts/test.sh fast|slow}
PYTEST=${PYTEST:-.venv/bin/python -m pytest}

phases=()
results=()
failed=0

phase() {
  local name=$1 t0=$SECONDS rc
  shift
  printf '\n== %s: %s\n' "$suite" "$name"
  "$@"
  rc=$?
  phases+=("$name")
  results+=("$(printf '%6ds  %s' $((SECONDS - t0)) "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  [ $rc -eq 0 ] || failed=1
}

# Each pytest phase also writes JUnit XML under build/test-results/ (.ci/run totals them in its last line).
# Exit 5 (no test collected) counts as a failure: a selection that finds nothing tests nothing.
# Two pytest-xdist workers, one test file each at a time (module fixtures stay one per file): most of a test's
# time is a server and a Locust process waiting out a fixed window at a fraction of a core, so two files side by
# side nearly halve the wall time. Every test starts its own servers on free ports, in its own folders, and
# asserts bounds that hold on a busy machine. PYTEST_WORKERS=0 runs them one at a time. The slow suite's few
# long files go first, in the order tests/support/schedule.py gives (xdist would put the files with most tests first).
pytest_marked() {
  mkdir -p build/test-results
  $PYTEST -q -m "$1" -n "${PYTEST_WORKERS:-2}" --dist loadfile --junitxml="build/test-results/$2.xml" "${@:3}"
}

case "$suite" in
  fast)
    phase lint make --no-print-directory lint
    phase go-test make --no-print-directory test-go
    phase c-test make --no-print-directory test-c
    phase fuzz-replay make --no-print-directory fuzz-replay
    phase asan make --no-print-directory test-asan
    phase pytest pytest_marked "not slow" fast
    ;;
  slow)
    phase fuzz-explore make --no-print-directory fuzz FUZZ_SECONDS=15 GO_FUZZ_EXECS=15000  # bounded for CI's budget
    phase pytest-slow pytest_marked slow slow --no-loadscope-reorder
    phase fresh-check make --no-print-directory fresh-check  # the fast suite in a pristine container (7 minutes)
    ;;
  *)
    echo "usage: scripts/test.sh fast|slow" >&2
    exit 2
    ;;
esac

# The Podman service `make containers` started for this suite (xferbench/run/containers/engine.py), stopped.
.venv/bin/python -m xferbench.run.containers --stop

printf '\n== %s: time by phase\n' "$suite"
for i in "${!phases[@]}"; do
  printf '%-14s %s\n' "${phases[$i]}" "${results[$i]}"
done
printf '%-14s %6ds\n' total "$SECONDS"
exit $failed
