"""The workunits of one MD time step, each a separate kernel as in ExaMiniMD.

Conventions: ``x``, ``v``, ``f`` are (N, 3) Views indexed ``x[i][d]``; in every kernel that writes a
per-atom array the thread index is the atom ``i`` and it writes only row ``i``, so consecutive kernels
over the atoms line up for fusion. The box is [0, lx) x [0, ly) x [0, lz), periodic; pair distances use
the minimum image (the input's cutoff must stay below half the box, which the driver checks).
"""
from __future__ import annotations

import kfuse as pk


# --- integration (fix nve: velocity Verlet) --------------------------------------------------------
@pk.workunit
def initial_integrate(i, x: pk.View2D[pk.double], v: pk.View2D[pk.double], f: pk.View2D[pk.double],
                      atype: pk.View1D[pk.int32], mass: pk.View1D[pk.double], dt: float, dtf: float):
    """First half kick v += (dt/2) f/m, then drift x += dt v."""
    dtfm = dtf / mass[atype[i]]
    for d in range(3):
        v[i][d] += dtfm * f[i][d]
        x[i][d] += dt * v[i][d]


@pk.workunit
def final_integrate(i, v: pk.View2D[pk.double], f: pk.View2D[pk.double], atype: pk.View1D[pk.int32],
                    mass: pk.View1D[pk.double], dtf: float):
    """Second half kick v += (dt/2) f/m with the new forces."""
    dtfm = dtf / mass[atype[i]]
    for d in range(3):
        v[i][d] += dtfm * f[i][d]


# --- periodic boundaries ("exchange" with ourselves) -------------------------------------------------
@pk.workunit
def wrap_positions(i, x: pk.View2D[pk.double], lx: float, ly: float, lz: float):
    """Fold x back into the box; atoms move far less than a box length between rebuilds."""
    if x[i][0] < 0.0:
        x[i][0] += lx
    elif x[i][0] >= lx:
        x[i][0] -= lx
    if x[i][1] < 0.0:
        x[i][1] += ly
    elif x[i][1] >= ly:
        x[i][1] -= ly
    if x[i][2] < 0.0:
        x[i][2] += lz
    elif x[i][2] >= lz:
        x[i][2] -= lz


# --- forces and energies -----------------------------------------------------------------------------
@pk.function
def min_image(d: float, box: float) -> float:
    """The periodic image of a separation d nearest zero (|d| < 1.5 box holds between rebuilds)."""
    if d > 0.5 * box:
        return d - box
    if d < -0.5 * box:
        return d + box
    return d


@pk.workunit
def zero_forces(i, f: pk.View2D[pk.double], virial: pk.View1D[pk.double]):
    for d in range(3):
        f[i][d] = 0.0
    virial[i] = 0.0


@pk.workunit
def lj_force(i, x: pk.View2D[pk.double], f: pk.View2D[pk.double], virial: pk.View1D[pk.double],
             neigh: pk.View2D[pk.int32], num_neigh: pk.View1D[pk.int32], lx: float, ly: float, lz: float,
             cutsq: float, c12: float, c6: float):
    """LJ force on atom i from its full neighbour list; also its share of the virial sum r.F.

    For U = 4 eps ((s/r)^12 - (s/r)^6), F_ij = (48 eps s^12 / r^14 - 24 eps s^6 / r^8) r_ij, so with
    c12 = 48 eps s^12 and c6 = 24 eps s^6 the pair factor is (c12 / r^6 - c6) / r^8.
    """
    xi = x[i][0]
    yi = x[i][1]
    zi = x[i][2]
    fx = 0.0
    fy = 0.0
    fz = 0.0
    w = 0.0
    for k in range(num_neigh[i]):
        j = neigh[i][k]
        dx = min_image(xi - x[j][0], lx)
        dy = min_image(yi - x[j][1], ly)
        dz = min_image(zi - x[j][2], lz)
        rsq = dx * dx + dy * dy + dz * dz
        if rsq < cutsq:
            sr2 = 1.0 / rsq
            sr6 = sr2 * sr2 * sr2
            fpair = (c12 * sr6 - c6) * sr6 * sr2
            fx += dx * fpair
            fy += dy * fpair
            fz += dz * fpair
            w += rsq * fpair
    f[i][0] += fx
    f[i][1] += fy
    f[i][2] += fz
    virial[i] += 0.5 * w  # each pair is seen from both atoms


@pk.workunit
def lj_energy(i, acc: pk.Acc[pk.double], x: pk.View2D[pk.double], neigh: pk.View2D[pk.int32],
              num_neigh: pk.View1D[pk.int32], lx: float, ly: float, lz: float, cutsq: float, e12: float,
              e6: float, eshift: float):
    """Total pair energy: sum over pairs i<j within the cutoff of 4 eps ((s/r)^12 - (s/r)^6) - eshift.

    e12 = 4 eps s^12, e6 = 4 eps s^6; eshift is U(cutoff) with ``pair_modify shift yes``, else 0.
    """
    xi = x[i][0]
    yi = x[i][1]
    zi = x[i][2]
    e = 0.0
    for k in range(num_neigh[i]):
        j = neigh[i][k]
        dx = min_image(xi - x[j][0], lx)
        dy = min_image(yi - x[j][1], ly)
        dz = min_image(zi - x[j][2], lz)
        rsq = dx * dx + dy * dy + dz * dz
        if rsq < cutsq:
            sr2 = 1.0 / rsq
            sr6 = sr2 * sr2 * sr2
            e += (e12 * sr6 - e6) * sr6 - eshift
    acc += 0.5 * e  # the full list holds each pair twice


@pk.workunit
def kinetic_energy(i, acc: pk.Acc[pk.double], v: pk.View2D[pk.double], atype: pk.View1D[pk.int32],
                   mass: pk.View1D[pk.double]):
    acc += 0.5 * mass[atype[i]] * (v[i][0] * v[i][0] + v[i][1] * v[i][1] + v[i][2] * v[i][2])


@pk.workunit
def sum_values(i, acc: pk.Acc[pk.double], values: pk.View1D[pk.double]):
    acc += values[i]


# --- neighbour list: bin the atoms, then search the 27 surrounding bins -------------------------------
@pk.workunit
def zero_counts(b, counts: pk.View1D[pk.int32]):
    counts[b] = 0


@pk.workunit
def bin_atoms(i, x: pk.View2D[pk.double], bin_of: pk.View1D[pk.int32], slot: pk.View1D[pk.int32],
              counts: pk.View1D[pk.int32], nbx: int, nby: int, nbz: int, lx: float, ly: float, lz: float,
              ox: float, oy: float, oz: float, px: int, py: int, pz: int):
    """Put atom i in its bin; the atomic counter hands it a unique slot inside that bin.

    The binned region starts at (ox, oy, oz) and spans nb* bins of l*/nb* each, inside p* (0 or 1) empty
    layers of bins on both sides (along a dimension where a rank's sub-box has ghosts: the search then never
    wraps around there)."""
    bx = px + min(int((x[i][0] - ox) * nbx / lx), nbx - 1)
    by = py + min(int((x[i][1] - oy) * nby / ly), nby - 1)
    bz = pz + min(int((x[i][2] - oz) * nbz / lz), nbz - 1)
    b = (bx * (nby + 2 * py) + by) * (nbz + 2 * pz) + bz
    bin_of[i] = b
    slot[i] = pk.atomic_fetch_add(counts, [b], 1)


@pk.workunit
def bin_offsets(b, acc: pk.Acc[pk.int64], last_pass: bool, counts: pk.View1D[pk.int32],
                offsets: pk.View1D[pk.int32]):
    """Exclusive prefix sum of the bin counts: where each bin's atoms start in the packed list."""
    if last_pass:
        offsets[b] = acc
    acc += counts[b]


@pk.workunit
def fill_bins(i, bin_of: pk.View1D[pk.int32], slot: pk.View1D[pk.int32], offsets: pk.View1D[pk.int32],
              packed: pk.View1D[pk.int32]):
    packed[offsets[bin_of[i]] + slot[i]] = i


@pk.workunit
def sort_bins(b, counts: pk.View1D[pk.int32], offsets: pk.View1D[pk.int32], packed: pk.View1D[pk.int32]):
    """Order each bin's atoms by index: the atomics fill bins in a racy order, and a fixed order makes
    the neighbour lists, hence the force sums and the whole run, reproducible bit for bit."""
    start = offsets[b]
    for k in range(start + 1, start + counts[b]):
        atom = packed[k]
        m = k - 1
        while m >= start and packed[m] > atom:
            packed[m + 1] = packed[m]
            m -= 1
        packed[m + 1] = atom


@pk.workunit
def build_neighbors(i, x: pk.View2D[pk.double], bin_of: pk.View1D[pk.int32], counts: pk.View1D[pk.int32],
                    offsets: pk.View1D[pk.int32], packed: pk.View1D[pk.int32], neigh: pk.View2D[pk.int32],
                    num_neigh: pk.View1D[pk.int32], nbx: int, nby: int, nbz: int, sx: int, sy: int, sz: int,
                    lx: float, ly: float, lz: float, cutsq: float, max_neigh: int):
    """Full list: every j != i within the neighbour cutoff, searched over the bins around i's bin.

    ``s*`` is the first stencil offset per dimension (-1 normally; 0 when there are fewer than three bins
    across, so no bin is visited twice). Atoms past ``max_neigh`` are counted but not stored; the driver
    then grows the list and builds again.
    """
    b = bin_of[i]
    bx = b // (nby * nbz)
    by = (b // nbz) % nby
    bz = b % nbz
    xi = x[i][0]
    yi = x[i][1]
    zi = x[i][2]
    n = 0
    for ox in range(sx, min(2, nbx + sx)):
        cx = (bx + ox + nbx) % nbx
        for oy in range(sy, min(2, nby + sy)):
            cy = (by + oy + nby) % nby
            for oz in range(sz, min(2, nbz + sz)):
                cz = (bz + oz + nbz) % nbz
                c = (cx * nby + cy) * nbz + cz
                for s in range(offsets[c], offsets[c] + counts[c]):
                    j = packed[s]
                    if j != i:
                        dx = min_image(xi - x[j][0], lx)
                        dy = min_image(yi - x[j][1], ly)
                        dz = min_image(zi - x[j][2], lz)
                        if dx * dx + dy * dy + dz * dz < cutsq:
                            if n < max_neigh:
                                neigh[i][n] = j
                            n += 1
    num_neigh[i] = n


@pk.workunit
def count_overflow(i, acc: pk.Acc[pk.int64], num_neigh: pk.View1D[pk.int32], max_neigh: int):
    if num_neigh[i] > max_neigh:
        acc += 1


# --- ghost atoms (parallel.py): the positions a rank sends its neighbour --------------------------------
@pk.workunit
def pack_positions(i, x: pk.View2D[pk.double], send: pk.View1D[pk.int32], buf: pk.View2D[pk.double],
                   shifts: pk.View2D[pk.double], split: int):
    """Row i of one dimension's two ghost messages (rows before ``split`` go to the lower neighbour, the rest to
    the upper): atom send[i]'s position moved by its message's periodic shift, so the receiver gets the image
    next to its sub-box."""
    k = 0
    if i >= split:
        k = 1
    j = send[i]
    for d in range(3):
        buf[i][d] = x[j][d] + shifts[k][d]


@pk.workunit
def unpack_positions(i, x: pk.View2D[pk.double], buf: pk.View2D[pk.double], first: int):
    """Received ghost messages into rows first, first + 1, ... of x (a kernel, so that on a GPU only the
    messages cross to the device, not all of x)."""
    for d in range(3):
        x[first + i][d] = buf[i][d]
