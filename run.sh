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
  test) shift || true; cd "$repo" && exec "$py" -m pytest -q "$@" tests ;;
  *) echo "usage: ./run.sh [demo|test] [args...]" >&2; exit 2 ;;
esac
