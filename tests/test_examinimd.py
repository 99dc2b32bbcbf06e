"""ExaMiniMD-style LJ molecular dynamics (examples/examinimd): input, physics against NumPy, fusion, reference.

Small systems keep these fast; the 16^3-cell run is checked against the PyKokkos port's published
values. Every check runs the real kernels through the C++ compiler.
"""
import io
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from examinimd import DEFAULT_INPUT, InputError, Simulation, parse, read, run_simulation  # noqa: E402
from examinimd.atoms import (VELOCITY_GENERATORS, create_velocities, fcc_positions, geom_uniforms,  # noqa: E402
                             lammps_uniforms, lattice_constant)

IN_LJ = DEFAULT_INPUT.read_text()


# --- independent reference: all pairs, minimum image, NumPy -----------------------------------------------
def numpy_lj(pos, box, cutoff, eps=1.0, sigma=1.0, shift=True):
    """Forces, total pair energy and virial sum r.F of a periodic LJ system, from all N^2 pairs."""
    box = np.asarray(box)
    d = pos[:, None, :] - pos[None, :, :]
    d -= box * np.round(d / box)
    r2 = (d * d).sum(axis=-1)
    np.fill_diagonal(r2, np.inf)
    inside = r2 < cutoff * cutoff
    s6 = np.where(inside, (sigma * sigma / r2) ** 3, 0.0)
    fscale = np.where(inside, 24.0 * eps * (2.0 * s6 * s6 - s6) / r2, 0.0)
    forces = (fscale[:, :, None] * d).sum(axis=1)
    u_cut = 4.0 * eps * ((sigma / cutoff) ** 12 - (sigma / cutoff) ** 6) if shift else 0.0
    energy = 0.5 * np.where(inside, 4.0 * eps * (s6 * s6 - s6) - u_cut, 0.0).sum()
    virial = 0.5 * (fscale * np.where(inside, r2, 0.0)).sum()
    return forces, energy, virial


def neighbor_sets(pos, box, cutoff):
    box = np.asarray(box)
    d = pos[:, None, :] - pos[None, :, :]
    d -= box * np.round(d / box)
    r2 = (d * d).sum(axis=-1)
    np.fill_diagonal(r2, np.inf)
    return [set(np.nonzero(row < cutoff * cutoff)[0].tolist()) for row in r2]


def small(cells, steps=None):
    return read().with_overrides(cells=cells, steps=steps)


# --- input ---------------------------------------------------------------------------------------------
def test_in_lj_is_the_lj_melt_problem():
    inp = parse(IN_LJ)
    assert inp.density == 0.8442 and inp.region == (0, 16, 0, 16, 0, 16) and inp.cells == (16, 16, 16)
    assert inp.masses == {1: 2.0} and inp.atom_type == 1
    assert (inp.temperature, inp.seed) == (1.4, 87287)
    assert (inp.coeff.epsilon, inp.coeff.sigma, inp.coeff.cutoff) == (1.0, 1.0, 2.5) and inp.shift
    assert (inp.skin, inp.neigh_every, inp.dt, inp.thermo_every, inp.steps) == (0.3, 20, 0.005, 10, 100)
    over = inp.with_overrides(cells=5, steps=7)
    assert over.cells == (5, 5, 5) and over.steps == 7 and over.seed == inp.seed


@pytest.mark.parametrize("text, message", [
    (IN_LJ.replace("units           lj", "units           metal"), "line 2: only 'units lj'"),
    (IN_LJ.replace("fix             1 all nve", "fix             1 all nvt"), "line 20: only 'fix <id> all nve'"),
    (IN_LJ + "kspace_style ewald 1e-4\n", "unknown or unsupported command 'kspace_style'"),
    (IN_LJ.replace("loop geom", "loop all"), "'velocity loop all' is not supported"),
    (IN_LJ.replace("mass            1 2.0", ""), "no mass for atom type 1"),
    (IN_LJ.replace("every 20", "every x"), "must be an integer, got 'x'"),
    (IN_LJ + "newton sometimes\n", "'newton' takes 'on' or 'off'"),
])
def test_bad_input_is_rejected_with_its_line(text, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


# --- initial state ---------------------------------------------------------------------------------------
def test_fcc_lattice_has_the_input_density():
    a = lattice_constant(0.8442)
    pos = fcc_positions((3, 4, 5), a)
    assert len(pos) == 4 * 3 * 4 * 5
    assert len(np.unique(np.round(pos / (0.5 * a)).astype(int), axis=0)) == len(pos)
    assert len(pos) / (3 * 4 * 5 * a ** 3) == pytest.approx(0.8442, rel=1e-12)


def test_examinimd_input_parses_with_newton():
    """ExaMiniMD's own in.lj says 'newton off'; it changes nothing here (full neighbour lists: no force goes back
    to a ghost atom, on any number of ranks)."""
    assert parse(IN_LJ + "newton off\n") == parse(IN_LJ) == parse(IN_LJ + "newton on\n")


class ReferenceRanPark:
    """LAMMPS's RanPark, one atom at a time in plain Python: the reference for the vectorised generator.

    Written from the algorithm: a one-at-a-time hash over the bytes (as signed chars) of the int seed and
    of the three doubles, its final avalanche, 27 bits as the seed, 5 warm-up draws; draws by Schrage's
    method (the vectorised code uses the direct product modulo 2^31 - 1 instead).
    """

    def __init__(self, seed, coord):
        h = 0
        for byte in struct.pack("<i", seed) + struct.pack("<3d", *coord):
            signed = byte - 256 if byte > 127 else byte
            h = (h + signed) % 2 ** 32
            h = (h + (h << 10)) % 2 ** 32
            h ^= h >> 6
        h = (h + (h << 3)) % 2 ** 32
        h ^= h >> 11
        h = (h + (h << 15)) % 2 ** 32
        self.seed = (h & 0x7FFFFFF) or 1
        for _ in range(5):
            self.uniform()

    def uniform(self):
        k = self.seed // 127773
        self.seed = 16807 * (self.seed - k * 127773) - 2836 * k
        if self.seed < 0:
            self.seed += 2147483647
        return (1.0 / 2147483647) * self.seed


@pytest.mark.parametrize("seed", [87287, 1, 2 ** 31 - 1])
def test_lammps_generator_matches_the_one_atom_reference_bit_for_bit(seed):
    a = lattice_constant(0.8442)
    pos = np.concatenate([fcc_positions((3, 3, 3), a),
                          np.random.default_rng(seed).uniform(-50.0, 50.0, (40, 3)), [[-0.0, 1e-300, 3e300]]])
    expected = np.array([[gen.uniform() for _ in range(3)] for gen in (ReferenceRanPark(seed, p) for p in pos)])
    assert np.array_equal(lammps_uniforms(pos, seed), expected)


def test_lammps_velocities_are_examinimds():
    """Values from the PyKokkos ExaMiniMD port's own routine (input.py, on kfuse), 5^3 cells, seed 87287."""
    a = lattice_constant(0.8442)
    pos = fcc_positions((5, 5, 5), a)
    assert lammps_uniforms(pos, 87287)[:2].tolist() == [
        [0.4632199050221685, 0.33694370758577424, 0.012893394107415058],
        [0.19580233339024816, 0.8498172899008809, 0.8791913641054143]]
    v = create_velocities(lammps_uniforms(pos, 87287), np.full(len(pos), 2.0), 1.4)
    port = [[-0.12554409454861779, -0.5239840668807081, -1.3738126823989827],
            [-0.9141185424502226, 0.9884034682739851, 1.1807705457732613]]
    assert np.allclose(v[:2], port, rtol=0, atol=1e-15)  # the port's temperature sum adds in another order
    with pytest.raises(ValueError, match="positive 32-bit"):
        lammps_uniforms(pos, 2 ** 31)


@pytest.mark.parametrize("generator", VELOCITY_GENERATORS)
def test_loop_geom_velocities_follow_the_site_not_the_atom_order(generator):
    a = lattice_constant(0.8442)
    pos = fcc_positions((3, 3, 3), a)
    perm = np.random.default_rng(0).permutation(len(pos))
    u = geom_uniforms(generator, pos, 87287, a)
    assert np.array_equal(geom_uniforms(generator, pos[perm], 87287, a), u[perm])
    assert not np.allclose(geom_uniforms(generator, pos, 87288, a), u)
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.05
    masses = np.full(len(pos), 2.0)
    v = create_velocities(u, masses, 1.4)
    assert np.allclose((masses[:, None] * v).sum(axis=0), 0.0, atol=1e-12)
    assert (masses[:, None] * v * v).sum() / (3 * len(pos) - 3) == pytest.approx(1.4, rel=1e-12)
    with pytest.raises(ValueError, match="unknown velocity generator 'gauss'"):
        geom_uniforms("gauss", pos, 87287, a)


@pytest.mark.parametrize("generator", VELOCITY_GENERATORS)
def test_initial_temperature_and_momentum_from_the_kernels(generator):
    sim = Simulation(small(3), velocities=generator)
    assert sim.temperature() == pytest.approx(1.4, rel=1e-12)
    assert np.abs(sim.momentum()).max() < 1e-12


# --- forces, energy, virial, neighbour list against all-pairs NumPy --------------------------------------
@pytest.mark.parametrize("cells, jitter", [(3, 0.0), (3, 0.1), (4, 0.1), (6, 0.1)])  # 1, 2 and 3 bins across
def test_step0_forces_energy_and_pressure_match_all_pairs(cells, jitter):
    sim = Simulation(small(cells))
    pos = np.asarray(sim.x) + np.random.default_rng(cells).uniform(-jitter, jitter, (sim.natoms, 3))
    sim.x[:] = pos  # atoms near the faces leave the box: setup() must wrap them back
    row = sim.setup()
    x = np.asarray(sim.x)
    assert (x >= 0).all() and (x < np.asarray(sim.box)).all()
    assert np.allclose(x, pos % np.asarray(sim.box), rtol=0, atol=1e-12)

    forces, energy, virial = numpy_lj(x, sim.box, 2.5)
    scale = np.abs(forces).max() if jitter else 1.0
    assert np.allclose(np.asarray(sim.f), forces, rtol=0, atol=1e-11 * scale)
    assert row.potential_energy == pytest.approx(energy / sim.natoms, rel=1e-12)
    ke = 0.5 * 2.0 * (np.asarray(sim.v) ** 2).sum()
    assert row.temperature == pytest.approx(2 * ke / (3 * sim.natoms - 3), rel=1e-12)
    assert row.total_energy == pytest.approx((ke + energy) / sim.natoms, rel=1e-12)
    expected_p = (sim.natoms * row.temperature + virial / 3.0) / sim.volume
    assert row.pressure == pytest.approx(expected_p, rel=1e-10, abs=1e-12)

    nl = sim.neighbors
    stored = np.asarray(nl.neigh)
    counts = np.asarray(nl.num_neigh)
    expected = neighbor_sets(x, sim.box, 2.8)
    assert [set(stored[i, :counts[i]].tolist()) for i in range(sim.natoms)] == expected
    assert all(len(set(stored[i, :counts[i]].tolist())) == counts[i] for i in range(sim.natoms))


def test_neighbor_list_grows_when_an_atom_has_too_many():
    import kfuse as pk

    sim = Simulation(small(4))
    nl = sim.neighbors
    nl.max_neigh = 5
    nl.neigh = pk.View((sim.natoms, 5), pk.int32)
    sim.setup()
    x = np.asarray(sim.x)
    expected = neighbor_sets(x, sim.box, 2.8)
    assert nl.max_neigh >= max(len(s) for s in expected)
    stored, counts = np.asarray(nl.neigh), np.asarray(nl.num_neigh)
    assert [set(stored[i, :counts[i]].tolist()) for i in range(sim.natoms)] == expected


def test_pair_energy_without_shift_is_the_plain_lj_sum():
    sim = Simulation(parse(IN_LJ.replace("shift yes", "shift no")).with_overrides(cells=3))
    row = sim.setup()
    _, energy, _ = numpy_lj(np.asarray(sim.x), sim.box, 2.5, shift=False)
    assert row.potential_energy == pytest.approx(energy / sim.natoms, rel=1e-12)


# --- dynamics: conservation, and fusion changes nothing --------------------------------------------------
STEPS = 60  # three neighbour-list rebuilds


@pytest.fixture(scope="module")
def eager_run():
    sims = []
    rows = run_simulation(cells=4, steps=STEPS, simulation=sims)
    return rows, sims[0]


def test_momentum_and_energy_are_conserved(eager_run):
    rows, sim = eager_run
    assert [r.step for r in rows] == list(range(0, STEPS + 1, 10))
    assert np.abs(sim.momentum()).max() < 1e-10
    e0 = rows[0].total_energy
    drift = max(abs(r.total_energy - e0) for r in rows) / abs(e0)
    assert drift < 5e-4
    assert rows[-1].temperature < 0.9 * rows[0].temperature  # the lattice melts: KE turns into PE


def test_fused_run_matches_eager(eager_run):
    import kfuse as pk

    rows, _ = eager_run
    was = pk.fusion_enabled()
    before = pk.stats()["fused_kernels_launched"]
    fused = run_simulation(cells=4, steps=STEPS, fusion=True)
    assert pk.fusion_enabled() == was
    assert pk.stats()["fused_kernels_launched"] > before  # the run really went through the fuser
    assert len(fused) == len(rows)
    for a, b in zip(rows, fused):
        assert a.step == b.step
        assert np.allclose(a[1:], b[1:], rtol=1e-9, atol=0)


def test_repeated_runs_settle_their_trials_against_running_untraced(eager_run, monkeypatch):
    """Runs of the simulation, each with its neighbour-list rebuilds: a repeated flush's trial against running
    untraced (kfuse/rerun.py, kfuse/untraced.py) ends in a decision instead of starting over. A rebuild's first call
    ends an untraced repetition of the step's flush; it must be able to start a repetition of the rebuild's own
    flush, else that flush is traced anew every time and its kept template, replaced, never finishes its trial. Each
    fused run computes the eager rows."""
    import kfuse as pk
    from kfuse import rerun

    restarted = []
    keep = rerun.Rerun.keep

    def counting_keep(self, rt, entries, launches, record, waiting=()):
        before = [t for listed in self.templates.values() for t in listed]
        kept = keep(self, rt, entries, launches, record, waiting)
        now = {id(t) for listed in self.templates.values() for t in listed}
        restarted.extend(t for t in before if id(t) not in now and t.trial is not None and t.trial.untraced is None
                         and t.trial.untraced_s and not t.trial.traced_s)
        return kept
    monkeypatch.setattr(rerun.Rerun, "keep", counting_keep)
    monkeypatch.setenv("KFUSE_PROFIT", "measure")  # (the tests' default fuses every group, with no trials)
    rows, _ = eager_run
    pk.enable_fusion()
    try:
        for run in range(8):
            if run == 4:
                restarted.clear()  # (the first runs compile, time and decide)
            fused = run_simulation(cells=4, steps=20)
            for a, b in zip(rows, fused):
                assert np.allclose(a[1:], b[1:], rtol=1e-9, atol=0)
    finally:
        pk.disable_fusion()
    assert restarted == []


# --- the published problem ---------------------------------------------------------------------------------
def test_16_cells_100_steps_matches_the_reference():
    """PyKokkos ExaMiniMD, unfused, 16^3 cells, step 100: T 0.730527, PE -5.328677, E -4.232953 (per atom).

    With ExaMiniMD's velocities (the default) every printed digit agrees."""
    rows = run_simulation(cells=16, steps=100)
    first, last = rows[0], rows[-1]
    assert first.temperature == pytest.approx(1.4, rel=1e-12)
    assert last.step == 100
    assert last.line().split()[1:4] == ["0.730527", "-5.328677", "-4.232953"]


def test_command_line_prints_thermo_and_timings(capsys):
    from examinimd import main as cli

    assert cli.main([str(DEFAULT_INPUT), "--cells", "3", "--steps", "20"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["Step", "Temp", "PotEng", "TotEng", "Press"]
    table = [line.split() for line in out[1:4]]
    assert [int(r[0]) for r in table] == [0, 10, 20] and all(len(r) == 5 for r in table)
    assert float(table[0][1]) == pytest.approx(1.4)
    text = "\n".join(out)
    for phase in ("force", "neighbor", "integrate", "comm", "other", "ms/step", "atom-steps/s"):
        assert phase in text
    buf = io.StringIO()
    run_simulation(cells=3, steps=20, out=buf)
    assert buf.getvalue().splitlines() == out[:4]

    assert cli.main([str(DEFAULT_INPUT), "--cells", "3", "--steps", "10", "--velocities", "hash"]) == 0
    hashed = capsys.readouterr().out.splitlines()[1:3]
    assert hashed[0] == out[1] and hashed[1] != out[2]  # step 0 fixes T and the lattice; the trajectories differ
