"""examples/pykokkos/: PyKokkos programs in each style (standalone, workload, functor, classtype), run unmodified
through ``python -m kfuse run``, eager and fused, against NumPy versions written here."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "pykokkos"


def run_program(name: str, *args, fusion: bool, backend: str = "python") -> dict:
    env = {**os.environ, "KFUSE_BACKEND": backend}
    env.pop("KFUSE_FUSION", None)
    command = [sys.executable, "-m", "kfuse", "run", *(["--fusion"] if fusion else []), str(EXAMPLES / name),
               *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, done.stdout
    return json.loads(lines[0][len("RESULT "):])


def heat_reference(n: int, steps: int, alpha: float = 0.25) -> dict:
    x = np.linspace(0.0, 1.0, n)
    u = np.exp(-100.0 * (x - 0.3) ** 2)
    for _ in range(steps):
        new = u.copy()
        new[1:-1] = u[1:-1] + alpha * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        u = new
    return {"u": u, "total": u.sum()}


def jacobi_reference(n: int, sweeps: int) -> dict:
    grid = np.zeros((n, n))
    grid[0, :] = 1.0
    changes = []
    for _ in range(sweeps):
        new = grid.copy()
        new[1:-1, 1:-1] = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:])
        changes.append(np.abs(new - grid).sum())
        grid = new
    return {"grid": grid, "changes": changes}


def particles_reference(n: int, steps: int, dt: float = 0.01, k: float = 4.0) -> dict:
    rng = np.random.default_rng(7)
    x, v = rng.uniform(-1.0, 1.0, n), rng.uniform(-0.5, 0.5, n)
    kinetic = []
    for _ in range(steps):
        v = v + 0.5 * dt * (-k * x)
        x = x + dt * v
        v = v + 0.5 * dt * (-k * x)
        kinetic.append(np.sum(0.5 * v * v))
    return {"x": x, "v": v, "kinetic": kinetic}


CASES = {
    "heat_standalone.py": ((50, 12), heat_reference),
    "jacobi_workload.py": ((12, 6), jacobi_reference),
    "particles_functor.py": ((40, 7), particles_reference),
}


def check(result: dict, expected: dict) -> None:
    assert set(result) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(np.asarray(result[key]), np.asarray(value), rtol=1e-12, atol=1e-14, err_msg=key)


@pytest.mark.parametrize("fusion", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_program_matches_numpy(name, fusion):
    args, reference = CASES[name]
    check(run_program(name, *args, fusion=fusion), reference(*args))


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_program_fused_matches_numpy(name):
    args, reference = CASES[name]
    check(run_program(name, *args, fusion=True, backend="kokkos"), reference(*args))
