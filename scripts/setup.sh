#!/usr/bin/env bash
# Creates (or reuses) the virtual environment at <repo>/.venv with everything kfuse needs: Python dependencies,
# kfuse itself (editable), and Kokkos through 'python -m kfuse.kokkos install', the command a pip user runs (it
# builds Kokkos 3.4.01 once per user, or reuses a Kokkos kfuse already finds).
# Idempotent: a second run only checks that each piece is present.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
py="$venv/bin/python"

if [ ! -x "$py" ]; then
  echo "[setup] creating $venv"
  python3.11 -m venv "$venv" 2>/dev/null || python3 -m venv "$venv"
fi

stamp="$venv/.kfuse-deps-$(sha256sum "$repo/scripts/requirements.txt" | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "[setup] installing Python dependencies"
  "$py" -m pip install --quiet --upgrade pip
  "$py" -m pip install --quiet -r "$repo/scripts/requirements.txt"
  touch "$stamp"
fi

# Checked from / so that the repository folder itself (the working directory) does not make it importable.
if ! (cd / && "$py" -c "import kfuse.kokkos") 2>/dev/null; then
  echo "[setup] installing kfuse (editable)"
  "$py" -m pip install --quiet --no-build-isolation --no-deps -e "$repo"
fi

(cd / && "$py" -m kfuse.kokkos install)

# Warm-up: build the precompiled Kokkos header and the runtime library once (cached; ~3 s on first set-up),
# so the first real kernel compile costs only its own ~0.4 s.
"$py" -c "import kfuse; kfuse.initialize()"

# MPI (kfuse.comm, the multi-rank ExaMiniMD example and its CI test): mpi4py and MPICH come from PyPI with the
# requirements above; the test needs mpiexec, so its absence is an error here, not a skipped test later.
if [ ! -x "$venv/bin/mpiexec" ]; then
  echo "[setup] $venv/bin/mpiexec is missing: the 'mpich' package did not install it" >&2
  exit 1
fi
