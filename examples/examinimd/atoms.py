"""Initial state on the host: the fcc lattice and the ``velocity ... loop geom`` velocities (NumPy).

These run once before the time loop, so they stay plain NumPy; every per-step operation is a kernel.
"""
from __future__ import annotations

import numpy as np

# Corners of the conventional fcc cell, in units of the lattice constant.
FCC_BASIS = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]])


def lattice_constant(density: float) -> float:
    """fcc has 4 atoms per cubic cell, so a reduced density rho gives a = (4/rho)^(1/3)."""
    return (4.0 / density) ** (1.0 / 3.0)


def fcc_positions(cells: tuple, a: float) -> np.ndarray:
    """Atoms of an nx*ny*nz block of fcc cells, box corner at the origin; x fastest, basis innermost."""
    nx, ny, nz = cells
    k, j, i = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    corners = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1).astype(np.float64)
    return ((corners[:, None, :] + FCC_BASIS[None, :, :]).reshape(-1, 3) * a).copy()


# --- velocity create ... loop geom --------------------------------------------------------------
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a bijective 64-bit hash whose output bits all depend on all input bits."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def geom_uniforms(positions: np.ndarray, seed: int, grid: float, draws: int = 3) -> np.ndarray:
    """``draws`` uniform numbers in [-0.5, 0.5) per atom, a function of (seed, the atom's site) only.

    Like LAMMPS's ``loop geom``, each atom's generator is seeded from its coordinates, so the result does
    not depend on atom order or on how atoms are split over processors. Our choice of generator: the
    position is snapped to integer coordinates on a grid of spacing ``grid`` (half the lattice constant
    holds every fcc site exactly), the seed and the three integers are chained through splitmix64, and
    draw k is the hash of that key plus k times the golden-ratio increment, its top 53 bits as a fraction.
    """
    sites = np.rint(positions / grid).astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        key = _mix(np.full(len(positions), np.uint64(seed) & _MASK, dtype=np.uint64))
        for d in range(3):
            key = _mix(key ^ sites[:, d])
        golden = np.uint64(0x9E3779B97F4A7C15)
        out = np.empty((len(positions), draws))
        for k in range(draws):
            bits = _mix(key + golden * np.uint64(k + 1)) >> np.uint64(11)
            out[:, k] = bits.astype(np.float64) * 2.0 ** -53 - 0.5
    return out


def create_velocities(positions: np.ndarray, masses: np.ndarray, temperature: float, seed: int,
                      grid: float) -> np.ndarray:
    """``velocity all create T seed loop geom``: random velocities, zero total momentum, exactly T.

    T is measured as LAMMPS does for ``velocity create``: 2 KE / (3N - 3) with k_B = 1 (the centre of mass
    motion removed takes 3 degrees of freedom).
    """
    v = geom_uniforms(positions, seed, grid)
    m = masses[:, None]
    v -= (m * v).sum(axis=0) / masses.sum()
    dof = 3 * len(positions) - 3
    current = (m * v * v).sum() / dof
    return v * np.sqrt(temperature / current)
