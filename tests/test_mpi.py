"""MPI: kfuse.comm keeps each rank's trace right, and ExaMiniMD over 2 ranks gives the 1-rank thermo.

The comm tests run in this process, a world of one rank (MPI needs no mpiexec for that): a message to
oneself passes the same barriers as one to a neighbour. The ExaMiniMD tests start ``mpiexec -n 2`` (set-up
installs it into the virtual environment, so it is never missing in CI) and compare with a 1-rank run here.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk
from kfuse import comm, context

MPI = pytest.importorskip("mpi4py.MPI", reason="mpi4py is not installed (scripts/setup.sh installs it)")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "examples"))

from examinimd import run_simulation  # noqa: E402
from examinimd.atoms import fcc_positions, lattice_constant  # noqa: E402

SELF = MPI.COMM_SELF


@pk.workunit
def scale(i, src: pk.View1D[pk.double], dst: pk.View1D[pk.double], a: float):
    dst[i] = a * src[i]


@pk.workunit
def total(i, acc: pk.Acc[pk.double], src: pk.View1D[pk.double]):
    acc += src[i]


def pending() -> list:
    return [e.call.prepared.workunit for e in context.current().trace.entries]


# --- kfuse.comm and the tracer -----------------------------------------------------------------------------
def test_a_send_runs_the_pending_kernel_that_writes_the_message_first():
    pk.enable_fusion()
    src, a = pk.View(8), pk.View(8)
    src.fill(1.5)
    pk.parallel_for(8, scale, src=src, dst=a, a=2.0)
    assert len(pending()) == 1
    got = np.zeros(8)
    comm.sendrecv(a, 0, got, 0, comm=SELF)
    assert pending() == [] and got.tolist() == [3.0] * 8


def test_receive_runs_pending_readers_before_and_orders_later_kernels_after():
    """A kernel logged before the receive reads the old contents, one logged after reads the new; the same as
    eager execution of the same program."""
    def program():
        b, before, after = pk.View(6), pk.View(6), pk.View(6)
        b.fill(1.0)
        pk.parallel_for(6, scale, src=b, dst=before, a=10.0)
        comm.sendrecv(np.arange(6.0), 0, b, 0, comm=SELF)
        pk.parallel_for(6, scale, src=b, dst=after, a=10.0)
        return before.copy(), after.copy()

    eager = program()
    pk.enable_fusion()
    fused = program()
    assert eager[0].tolist() == fused[0].tolist() == [10.0] * 6
    assert eager[1].tolist() == fused[1].tolist() == [10.0 * k for k in range(6)]


def test_messages_leave_views_traced_and_other_kernels_pending():
    """The communicated Views do not escape (later kernels on them are still delayed), and a pending kernel
    on memory the message does not touch stays pending."""
    pk.enable_fusion()
    a, b, other, out = pk.View(4), pk.View(4), pk.View(4), pk.View(4)
    pk.parallel_for(4, scale, src=other, dst=out, a=3.0)
    comm.sendrecv(a, 0, b, 0, comm=SELF)
    assert pending() == [scale]
    assert not a.escaped() and not b.escaped()
    pk.parallel_for(4, scale, src=b, dst=a, a=1.0)
    assert pending() == [scale, scale]


def test_a_receive_into_a_row_range_changes_only_those_rows():
    pk.enable_fusion()
    x, src = pk.View((5, 3)), pk.View((5, 3))
    src.fill(2.0)
    pk.parallel_for(5, scale_rows, src=src, dst=x)
    comm.sendrecv(np.full((2, 3), 7.0), 0, x[1:3], 0, comm=SELF)
    assert x.copy().tolist() == [[4.0] * 3, [7.0] * 3, [7.0] * 3, [4.0] * 3, [4.0] * 3]


@pk.workunit
def scale_rows(i, src: pk.View2D[pk.double], dst: pk.View2D[pk.double]):
    for d in range(3):
        dst[i][d] = 2.0 * src[i][d]


def test_allreduce_takes_futures_and_numbers():
    pk.enable_fusion()
    v = pk.View(10)
    v.fill(0.5)
    futures = [pk.parallel_reduce(10, total, src=v), pk.parallel_reduce(4, total, src=v)]
    assert comm.allreduce(futures + [2], comm=SELF).tolist() == [5.0, 2.0, 2.0]
    assert comm.allreduce([1.0, -3.0], op="max", comm=SELF).tolist() == [1.0, -3.0]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="op must be one of sum, max, min, got 'prod'"):
        comm.allreduce([1.0], op="prod", comm=SELF)
    with pytest.raises(TypeError, match="sendrecv: send must be a pk.View or a NumPy array, got list"):
        comm.sendrecv([1.0], 0, np.zeros(1), 0, comm=SELF)
    with pytest.raises(ValueError, match="sendrecv: recv must be contiguous"):
        comm.sendrecv(np.zeros(2), 0, np.zeros((2, 2))[:, 0], 0, comm=SELF)
    with pytest.raises(ValueError, match="rank 0 sent 8 bytes, the receive buffer holds 16"):
        comm.sendrecv(np.zeros(1), 0, np.zeros(2), 0, comm=SELF)


def test_without_mpi4py_the_error_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(ImportError, match="kfuse.comm needs the package mpi4py"):
        comm.world()


# --- ExaMiniMD over two ranks -------------------------------------------------------------------------------
MPIEXEC = Path(sys.executable).parent / "mpiexec"
ROWS = """
import json, sys
sys.path.insert(0, {examples!r})
from mpi4py import MPI
from examinimd import run_simulation
sims = []
rows = run_simulation(cells=8, steps=50, fusion={fusion}, comm=MPI.COMM_WORLD, simulation=sims)
atoms = MPI.COMM_WORLD.allreduce(sims[0].nlocal)
if MPI.COMM_WORLD.Get_rank() == 0:
    print(json.dumps({{"rows": [list(r) for r in rows], "atoms": atoms, "grid": sims[0].grid}}))
"""


def mpiexec(ranks: int, *args: str) -> str:
    if not MPIEXEC.exists():
        pytest.skip(f"{MPIEXEC} is missing (scripts/setup.sh installs the 'mpich' package, which provides it)")
    env = dict(os.environ, PYTHONPATH=str(REPO), KFUSE_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run([str(MPIEXEC), "-n", str(ranks), sys.executable, *args], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_rank_lattice_block_has_the_whole_lattice_coordinates_bit_for_bit():
    """What makes each rank's velocity draws (a hash of the coordinates' bits) the one-rank run's."""
    a = lattice_constant(0.8442)
    whole = {row.tobytes() for row in fcc_positions((5, 5, 5), a)}
    block = fcc_positions((2, 3, 4), a, first=(3, 0, 1))
    assert len(block) == 4 * 2 * 3 * 4 and {row.tobytes() for row in block} <= whole


@pytest.fixture(scope="module")
def one_rank():
    return run_simulation(cells=8, steps=50)


@pytest.mark.parametrize("ranks, fusion, grid", [(2, True, [2, 1, 1]), (2, False, [2, 1, 1]), (4, False, [2, 2, 1])])
def test_ranks_give_the_one_rank_thermo(one_rank, ranks, fusion, grid):
    """Every atom stays on exactly one rank, and the thermo is the 1-rank run's (rounding apart: ghost images,
    sums in another order). Four ranks cut two dimensions: ghosts of ghosts, migration along x then y."""
    got = json.loads(mpiexec(ranks, "-c", ROWS.format(examples=str(REPO / "examples"), fusion=fusion)))
    assert got["grid"] == grid and got["atoms"] == 4 * 8 ** 3
    rows = got["rows"]
    assert [r[0] for r in rows] == [r.step for r in one_rank] == [0, 10, 20, 30, 40, 50]
    expected, got = np.array([r[1:] for r in one_rank]), np.array([r[1:] for r in rows])
    assert np.max(np.abs(got - expected) / np.abs(expected)) < 1e-6


def test_command_line_on_two_ranks_prints_the_thermo_and_the_decomposition(one_rank):
    out = mpiexec(2, str(REPO / "examples" / "examinimd" / "main.py"), "--cells", "8", "--steps", "50", "--fusion")
    lines = out.splitlines()
    assert lines[0] == "    Step Temp PotEng TotEng Press"
    printed = np.array([[float(v) for v in line.split()] for line in lines[1:7]])
    assert np.abs(printed - np.array([list(r) for r in one_rank])).max() <= 1.01e-6  # printed to 6 decimals
    assert "MPI: 2 ranks, process grid 2x1x1; rank 0 holds" in out and "messages staged through host memory" in out
    assert int(re.search(r"\((\d+) atoms migrated in\)", out).group(1)) > 0


def test_one_process_prints_the_same_with_or_without_mpi4py(monkeypatch, capsys):
    from examinimd import main

    def thermo(argv):
        main.main(argv)
        out = capsys.readouterr().out
        assert "MPI:" not in out
        return out.splitlines()[:3]

    with_mpi = thermo(["--cells", "4", "--steps", "10"])
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    assert thermo(["--cells", "4", "--steps", "10"]) == with_mpi
