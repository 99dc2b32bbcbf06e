#!/usr/bin/env bash
# The two commands of the README. Each does its own set-up (scripts/setup.sh, idempotent) first.
#   ./run.sh demo    run the demo: real kernels, eager vs fused, results and timings
#   ./run.sh test    run the whole test suite
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$repo/scripts/setup.sh"
py="$repo/.venv/bin/python"
case "${1:-demo}" in
  demo) shift || true; exec "$py" -m kfuse.demo "$@" ;;
  # Two workers (pytest-xdist) keep both of the CI machine's cores busy: a test is one Python thread, or one g++
  # compile, most of the time. "./run.sh test -n 0" runs the tests in one process.
  test) shift || true; cd "$repo" && exec "$py" -m pytest -q -n 2 "$@" tests ;;
  *) echo "usage: ./run.sh [demo|test] [args...]" >&2; exit 2 ;;
esac
