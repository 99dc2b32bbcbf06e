"""Strong and weak scaling of the ExaMiniMD example over MPI ranks, eager and fused: atom-steps per second.

    python benchmarks/bench_mpi_scaling.py [--ranks 1,2] [--cells 16] [--weak-cells 12] [--steps 100]
                                           [--threads 1] [--modes eager,fused] [--repeats 1]

Strong scaling runs the same ``--cells`` box (cubic) on every rank count; weak scaling gives each rank
``--weak-cells``^3 fcc cells, the box growing along the process grid MPI.Compute_dims picks (so atoms per rank stay
equal). Each configuration runs once first to compile its kernels (not timed), then ``--repeats`` times; the best
loop time is kept. Every rank gets ``--threads`` OpenMP threads. Prints the machine's load average before and
after (timings of a shared machine mean little without it) and a Markdown table: ranks, process grid, atoms,
loop time, atom-steps/s (system total), scaling against the fewest ranks (strong: speedup, weak: efficiency of
the rate per rank), the share of the loop in the comm phase (ghost exchange and migration, with the waiting for
the neighbour; with fusion it also holds kernels the first send runs, so read it from the eager rows), and the
bytes of ghost positions rank 0 sends per step. A second table times the ghost position exchange alone (pack
and unpack kernels and messages of 200 steps, no forces) for each multi-rank configuration, a third one
dimension's exchange of one rank with itself (kfuse's and MPI's own cost, no partner to wait for). GPU runs: set
KFUSE_DEFAULT_SPACE=Cuda; each rank takes the GPU of its local rank (examples/examinimd/README.md).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAIN = REPO / "examples" / "examinimd" / "main.py"
LOOP = re.compile(r"Loop time ([0-9.]+) s for \d+ steps with (\d+) atoms .* ([0-9.e+]+) atom-steps/s\)")
COMM = re.compile(r"^\s+comm\s+[0-9.]+ s\s+([0-9.]+) %", re.M)
MPI_LINE = re.compile(r"process grid (\S+); rank 0 holds (\d+) atoms and (\d+) ghosts .*sends (\d+) bytes")


def _ints(text: str) -> list:
    return [int(t) for t in text.split(",")]


def process_grid(ranks: int, python: str) -> tuple:
    """MPI's balanced 3-D grid for ``ranks`` (asked of mpi4py in a child, so this process never starts MPI)."""
    code = f"from mpi4py import MPI; print(*MPI.Compute_dims({ranks}, 3))"
    return tuple(int(t) for t in subprocess.run([python, "-c", code], capture_output=True, text=True,
                                                check=True).stdout.split())


def simulate(args, ranks: int, cells: tuple, fused: bool, steps: int) -> str:
    return run(args, ranks, [str(MAIN), "--cells", ",".join(map(str, cells)), "--steps", str(steps)]
               + (["--fusion"] if fused else []))


def run(args, ranks: int, program: list) -> str:
    """Rank 0's output of ``python <program>`` on ``ranks`` ranks."""
    env = dict(os.environ, KFUSE_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    command = [args.mpiexec, "-n", str(ranks), args.python, *program]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-3000:]}")
    return done.stdout


EXCHANGE = """
import sys, time
sys.path.insert(0, {examples!r})
from mpi4py import MPI
import kfuse as pk
from examinimd.input import read
from examinimd.parallel import ParallelSimulation
world = MPI.COMM_WORLD
sim = ParallelSimulation(read().with_overrides(cells={cells}, steps=0), "lammps", world)
sim.setup()
if {fused}:
    pk.enable_fusion()
sim.forward()  # compiles the pack and unpack kernels
pk.fence()
world.Barrier()
start = time.perf_counter()
for _ in range({repeats}):
    sim.forward()
pk.fence()
seconds = world.allreduce((time.perf_counter() - start) / {repeats}, op=MPI.MAX)
if world.Get_rank() == 0:
    print(seconds, sim.ghost_bytes_sent(), 2 * len(sim.halos))
"""


def exchange(args, ranks: int, cells: tuple, fused: bool) -> tuple:
    """Seconds per step of the ghost position exchange alone (slowest rank, mean of 200), bytes rank 0 sends
    per step, messages per step."""
    code = EXCHANGE.format(examples=str(REPO / "examples"), cells=cells, repeats=200, fused=fused)
    seconds, sent, messages = run(args, ranks, ["-c", code]).split()
    return float(seconds), int(sent), int(messages)


ITSELF = """
import sys, time
sys.path.insert(0, {examples!r})
import numpy as np
from mpi4py import MPI
import kfuse as pk
from examinimd.input import read
from examinimd.parallel import Halo, ParallelSimulation
sim = ParallelSimulation(read().with_overrides(cells={cells}, steps=0), "lammps", MPI.COMM_SELF)  # no halo of its own
sim.setup()
lx, cut = sim.box[0], sim.ghost_cutoff
x = sim.x.copy()[:sim.nlocal, 0]
rows = [np.nonzero(x < cut)[0], np.nonzero(x >= lx - cut)[0]]  # the atoms two x neighbours would get
halo = Halo(0, 0, 0, [[lx, 0.0, 0.0], [-lx, 0.0, 0.0]])
halo.resize(rows, (len(rows[0]), len(rows[1])), sim.nlocal)
sim.x.resize(0, sim.nlocal + len(rows[0]) + len(rows[1]))
if {fused}:
    pk.enable_fusion()
for _ in range(20):
    sim.send_positions(halo)
pk.fence()
start = time.perf_counter()
for _ in range({repeats}):
    sim.send_positions(halo)
pk.fence()
print((time.perf_counter() - start) / {repeats}, halo.send.extent(0) * 24)
"""


def exchange_with_itself(args, cells: tuple, fused: bool) -> tuple:
    """Seconds for one dimension's exchange (both messages, pack and unpack) of a rank with itself, mean of 500:
    kfuse's and MPI's own cost, with no partner to wait for; and the bytes sent."""
    code = ITSELF.format(examples=str(REPO / "examples"), cells=cells, repeats=500, fused=fused)
    seconds, sent = run(args, 1, ["-c", code]).split()
    return float(seconds), int(sent)


def measure(args, ranks: int, cells: tuple, fused: bool) -> dict:
    simulate(args, ranks, cells, fused, min(args.steps, 21))  # compiles; includes a neighbour list rebuild
    best = None
    for _ in range(args.repeats):
        out = simulate(args, ranks, cells, fused, args.steps)
        loop = LOOP.search(out)
        if loop is None:
            sys.exit(f"no 'Loop time' line in the output of {ranks} rank(s), cells {cells}:\n{out[-2000:]}")
        row = {"seconds": float(loop.group(1)), "atoms": int(loop.group(2)), "rate": float(loop.group(3)),
               "comm": float(COMM.search(out).group(1)), "grid": "1x1x1", "ghosts": 0, "bytes": 0}
        extra = MPI_LINE.search(out)
        if extra:
            row.update(grid=extra.group(1), ghosts=int(extra.group(3)), bytes=int(extra.group(4)))
        if best is None or row["seconds"] < best["seconds"]:
            best = row
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=_ints, default=[1, 2], help="rank counts, comma-separated (default 1,2)")
    parser.add_argument("--cells", type=int, default=16, help="strong scaling: fcc cells per side of the box")
    parser.add_argument("--weak-cells", type=int, default=12, help="weak scaling: fcc cells per side per rank")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="OpenMP threads per rank")
    parser.add_argument("--modes", default="eager,fused", help="eager, fused or both (default)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per configuration; the best is kept")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--mpiexec", default=str(Path(sys.executable).parent / "mpiexec"))
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    if not set(modes) <= {"eager", "fused"}:
        parser.error(f"--modes takes eager and/or fused, got {args.modes!r}")

    print(f"load average before: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    rows = []
    for scaling in ("strong", "weak"):
        for mode in modes:
            base = None
            for ranks in args.ranks:
                if scaling == "strong":
                    cells = (args.cells,) * 3
                else:
                    cells = tuple(args.weak_cells * g for g in process_grid(ranks, args.python))
                r = measure(args, ranks, cells, mode == "fused")
                per_rank = r["rate"] / ranks
                base = base or (r["rate"], per_rank)
                gain = r["rate"] / base[0] if scaling == "strong" else per_rank / base[1]
                rows.append(f"| {scaling} | {mode} | {ranks} | {r['grid']} | {'x'.join(map(str, cells))} | "
                            f"{r['atoms']} | {r['atoms'] // ranks} | {r['seconds']:.3f} | {r['rate']:.4g} | "
                            f"{gain:.2f} | {r['comm']:.1f} | {r['ghosts']} | {r['bytes']} |")
                print(rows[-1], flush=True)
    exchanges = []
    for scaling in ("strong", "weak"):
        for ranks in (r for r in args.ranks if r > 1):
            cells = ((args.cells,) * 3 if scaling == "strong"
                     else tuple(args.weak_cells * g for g in process_grid(ranks, args.python)))
            for mode in modes:
                seconds, sent, messages = exchange(args, ranks, cells, mode == "fused")
                exchanges.append(f"| {scaling} | {mode} | {ranks} | {'x'.join(map(str, cells))} | {messages} | "
                                 f"{sent} | {1e3 * seconds:.3f} |")
                print(exchanges[-1], flush=True)
    alone = []
    for cells in ((args.cells,) * 3, (args.weak_cells,) * 3):
        for mode in modes:
            seconds, sent = exchange_with_itself(args, cells, mode == "fused")
            alone.append(f"| {mode} | {'x'.join(map(str, cells))} | {sent} | {1e6 * seconds:.1f} |")
            print(alone[-1], flush=True)
    print(f"load average after: {Path('/proc/loadavg').read_text().strip()}")
    print(f"\n{args.steps} steps, {args.threads} OpenMP thread(s) per rank; scaling: strong = speedup over "
          f"{args.ranks[0]} rank(s), weak = atom-steps/s per rank relative to {args.ranks[0]} rank(s)\n")
    print("| scaling | mode | ranks | grid | cells | atoms | atoms/rank | loop s | atom-steps/s | scaling | comm % | "
          "ghosts (rank 0) | ghost bytes/step (rank 0) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if exchanges:
        print("\nThe ghost position exchange alone (pack and unpack kernels and the messages, no forces), slowest "
              "rank, mean of 200 steps:\n")
        print("| scaling | mode | ranks | cells | messages/step | bytes sent/step (rank 0) | ms/step |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(exchanges))
    print("\nOne dimension's exchange (two messages, one pack and one unpack kernel) of one rank with itself: the "
          "cost of kfuse and MPI per exchange, no partner to wait for; mean of 500:\n")
    print("| mode | cells | bytes sent | us |")
    print("|---|---|---|---|")
    print("\n".join(alone))
    return 0


if __name__ == "__main__":
    sys.exit(main())
