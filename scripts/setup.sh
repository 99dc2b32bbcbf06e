#!/usr/bin/env bash
# Creates (or reuses) the virtual environment at <repo>/.venv with everything kfuse needs:
# Python dependencies, kfuse itself (editable), and Kokkos via pykokkos-base built from source.
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

if ! "$py" -c "import kokkos" 2>/dev/null || [ ! -f "$venv/include/kokkos/Kokkos_Core.hpp" ]; then
  echo "[setup] building Kokkos 3.4.01 through pykokkos-base 0.0.7 (about 2-4 minutes, once)"
  # Why these options: CMake 4 rejects the bundled pybind11's old minimum version, the bundled pybind11 does
  # not compile for Python 3.11, and nvcc is installed on these machines without a GPU, so CUDA is forced off.
  pybind11_dir="$("$py" -c 'import pybind11; print(pybind11.get_cmake_dir())')"
  export PYKOKKOS_BASE_SETUP_ARGS="-DENABLE_LAYOUTS=OFF -DENABLE_MEMORY_TRAITS=OFF -DENABLE_VIEW_RANKS=3 -DKokkos_ENABLE_CUDA=OFF -DKokkos_ENABLE_OPENMP=ON -DENABLE_CUDA=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DENABLE_INTERNAL_PYBIND11=OFF -Dpybind11_DIR=$pybind11_dir"
  export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
  "$py" -m pip install --no-build-isolation --no-binary pykokkos-base pykokkos-base==0.0.7
fi

# Checked from / so that the repository folder itself (the working directory) does not make it importable.
if ! (cd / && "$py" -c "import kfuse") 2>/dev/null; then
  echo "[setup] installing kfuse (editable)"
  "$py" -m pip install --quiet --no-build-isolation --no-deps -e "$repo"
fi

# Warm-up: build the precompiled Kokkos header and the runtime library once (cached; ~3 s on first set-up),
# so the first real kernel compile costs only its own ~0.4 s.
"$py" -c "import kfuse; kfuse.initialize()"
