"""ExaMiniMD-style LJ molecular dynamics (examples/examinimd): input, physics against NumPy, fusion, reference.

Small systems keep these fast; the 16^3-cell run is checked against the PyKokkos port's published
values. Every check runs the real kernels through the C++ compiler.
"""
import io
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from examinimd import DEFAULT_INPUT, InputError, Simulation, parse, read, run_simulation  # noqa: E402
from examinimd.atoms import create_velocities, fcc_positions, geom_uniforms, lattice_constant  # noqa: E402

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


def test_loop_geom_velocities_follow_the_site_not_the_atom_order():
    a = lattice_constant(0.8442)
    pos = fcc_positions((3, 3, 3), a)
    perm = np.random.default_rng(0).permutation(len(pos))
    u = geom_uniforms(pos, 87287, 0.5 * a)
    assert np.array_equal(geom_uniforms(pos[perm], 87287, 0.5 * a), u[perm])
    assert not np.allclose(geom_uniforms(pos, 87288, 0.5 * a), u)
    assert u.min() >= -0.5 and u.max() < 0.5 and abs(u.mean()) < 0.05
    masses = np.full(len(pos), 2.0)
    v = create_velocities(pos, masses, 1.4, 87287, 0.5 * a)
    assert np.allclose((masses[:, None] * v).sum(axis=0), 0.0, atol=1e-12)
    assert (masses[:, None] * v * v).sum() / (3 * len(pos) - 3) == pytest.approx(1.4, rel=1e-12)


def test_initial_temperature_and_momentum_from_the_kernels():
    sim = Simulation(small(3))
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


# --- the published problem ---------------------------------------------------------------------------------
def test_16_cells_100_steps_matches_the_reference():
    """PyKokkos ExaMiniMD, unfused, 16^3 cells, step 100: T 0.730527, PE -5.328677, E -4.232953 (per atom)."""
    rows = run_simulation(cells=16, steps=100)
    first, last = rows[0], rows[-1]
    assert first.temperature == pytest.approx(1.4, rel=1e-12)
    assert last.step == 100
    assert last.temperature == pytest.approx(0.730527, rel=0.01)
    assert last.potential_energy == pytest.approx(-5.328677, rel=0.01)
    assert last.total_energy == pytest.approx(-4.232953, rel=0.01)


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
