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


def fcc_positions(cells: tuple, a: float, first: tuple = (0, 0, 0)) -> np.ndarray:
    """Atoms of an nx*ny*nz block of fcc cells from cell ``first`` on (a rank's part of the lattice: the same
    coordinates, bit for bit, as in the whole), box corner at the origin; x fastest, basis innermost."""
    nx, ny, nz = cells
    fx, fy, fz = first
    k, j, i = np.meshgrid(np.arange(fz, fz + nz), np.arange(fy, fy + ny), np.arange(fx, fx + nx), indexing="ij")
    corners = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1).astype(np.float64)
    return ((corners[:, None, :] + FCC_BASIS[None, :, :]).reshape(-1, 3) * a).copy()


# --- velocity create ... loop geom -------------------------------------------------------------
# Each atom's uniforms depend only on (seed, the atom's position), never on atom order or on how atoms
# are split over processors. Two generators: LAMMPS's (what ExaMiniMD and its PyKokkos port compute,
# so their thermo is reproduced) and a hash of the lattice site (insensitive to the last bits of the
# coordinates, which LAMMPS's hashes byte for byte).
VELOCITY_GENERATORS = ("lammps", "hash")

_PM_A, _PM_M = 16807, 2147483647  # Park-Miller minimal standard: state <- 16807 state mod (2^31 - 1)


def _one_at_a_time(h: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Mix each column of the signed bytes ``data`` (one row per hash) into the uint32 hashes ``h``.

    This is the loop of Jenkins's one-at-a-time hash as LAMMPS runs it over ``char`` data: a byte is
    sign-extended, then added modulo 2^32.
    """
    for column in data.astype(np.int32).view(np.uint32).T:
        h = h + column
        h = h + (h << np.uint32(10))
        h = h ^ (h >> np.uint32(6))
    return h


def lammps_uniforms(positions: np.ndarray, seed: int, draws: int = 3) -> np.ndarray:
    """``draws`` uniform numbers in (0, 1) per atom: LAMMPS's ``RanPark::reset(seed, coord)``, then ``uniform()``.

    Per atom: hash the 4 bytes of the 32-bit seed, then the 24 bytes of its three doubles (little-endian,
    as on x86), finish with the one-at-a-time avalanche; the low 27 bits (0 becomes 1) seed Park-Miller,
    which takes 5 warm-up steps; each draw is the next state times 1/(2^31 - 1).
    """
    if not 0 < seed < 2 ** 31:
        raise ValueError(f"the velocity seed must be a positive 32-bit integer, got {seed}")
    n = len(positions)
    seed_bytes = np.array([seed], dtype="<i4").view(np.int8)[None, :]
    coord_bytes = np.ascontiguousarray(positions, dtype="<f8").view(np.int8).reshape(n, 24)
    h = _one_at_a_time(np.zeros(1, dtype=np.uint32), seed_bytes)
    h = _one_at_a_time(np.repeat(h, n), coord_bytes)
    h = h + (h << np.uint32(3))
    h = h ^ (h >> np.uint32(11))
    h = h + (h << np.uint32(15))
    state = (h & np.uint32(0x7FFFFFF)).astype(np.int64)
    state[state == 0] = 1
    for _ in range(5):
        state = state * _PM_A % _PM_M  # exact in int64: the product stays below 2^46
    out = np.empty((n, draws))
    for k in range(draws):
        state = state * _PM_A % _PM_M
        out[:, k] = state * (1.0 / _PM_M)
    return out


_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a bijective 64-bit hash whose output bits all depend on all input bits."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hash_uniforms(positions: np.ndarray, seed: int, grid: float, draws: int = 3) -> np.ndarray:
    """``draws`` uniform numbers in [0, 1) per atom from a hash of the seed and the atom's lattice site.

    The position is snapped to integer coordinates on a grid of spacing ``grid`` (half the lattice
    constant holds every fcc site exactly), the seed and the three integers are chained through
    splitmix64, and draw k is the hash of that key plus k times the golden-ratio increment, its top 53
    bits as a fraction.
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
            out[:, k] = bits.astype(np.float64) * 2.0 ** -53
    return out


def geom_uniforms(generator: str, positions: np.ndarray, seed: int, a: float) -> np.ndarray:
    """Three uniforms in [0, 1) per atom from ``generator`` (one of ``VELOCITY_GENERATORS``); ``a`` is the
    lattice constant."""
    if generator == "lammps":
        return lammps_uniforms(positions, seed)
    if generator == "hash":
        return hash_uniforms(positions, seed, 0.5 * a)
    raise ValueError(f"unknown velocity generator '{generator}' (one of {', '.join(VELOCITY_GENERATORS)})")


def create_velocities(uniforms: np.ndarray, masses: np.ndarray, temperature: float, total=None) -> np.ndarray:
    """``velocity all create T seed dist uniform mom yes``: velocities from per-atom ``uniforms`` in [0, 1).

    As LAMMPS and ExaMiniMD: v = (u - 0.5) / sqrt(m) per component, so every atom starts with the same
    mean kinetic energy; then the centre-of-mass velocity is subtracted and v is scaled to T exactly,
    T = sum m v^2 / (3N - 3) with k_B = 1 (the removed centre-of-mass motion takes 3 degrees of freedom).
    ``total(s)`` adds a number or array of these atoms' sums over every rank's atoms (default: these are all).
    """
    total = total or (lambda s: s)
    m = masses[:, None]
    v = (uniforms - 0.5) / np.sqrt(m)
    v -= total((m * v).sum(axis=0)) / total(masses.sum())
    dof = 3 * total(len(masses)) - 3
    current = total((m * v * v).sum()) / dof
    return v * np.sqrt(temperature / current)
