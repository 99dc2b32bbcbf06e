"""Run every CPU example program of a PyKokkos checkout on kfuse, eager and fused, and count those that pass.

    .venv/bin/python scripts/pykokkos_examples.py /path/to/pykokkos [--only SUBSTRING] [--jobs N] [--timeout S]

Each program under ``<checkout>/examples`` runs twice, as a user would run it: ``python -m kfuse run program.py
ARGS`` (eager) and ``python -m kfuse run --fusion program.py ARGS`` (fused), in the folder it expects to be run
from. It passes when both exit 0 and print the same stdout once the masks of its PROGRAMS entry have hidden what
legitimately changes from run to run (timer readings and the rates computed from them); results are never masked.
Failures show the error the program ended with: exception, message, the program's line that failed and the
innermost frame (kfuse's, say) where that is deeper. The last line is
``N of M programs pass (K skipped)``: M counts the programs run, K those skipped; the exit status is 0 when all M
pass.

Why the runs are set up as they are:
- PROGRAMS gives each program small problem sizes (seconds per run; each new kernel costs a g++ compile of about
  0.4 s once, then the kernel cache), the CPU space where it takes one, its working folder and its masks.
  A program not in the table runs with no arguments and no masks: the programs here that need none, and any a
  newer checkout adds.
- CUDA is off (CUDA_VISIBLE_DEVICES empty, KFUSE_DEFAULT_SPACE=OpenMP): these machines have nvcc but no GPU.
  Programs that need a GPU, and GPU-Puzzles/puzzle5.py, which indexes outside its arrays (no implementation can
  run it correctly), are listed as skipped with the reason, not run.
- Kernels run on one OpenMP thread (KFUSE_NUM_THREADS=1): programs run side by side on a small machine, and
  ``pk.printf`` lines from parallel threads would otherwise come in a different order each run. A program whose
  TeamPolicy asks for larger teams gets that many threads (Kokkos refuses a team larger than its thread pool).
- Programs that draw unseeded random numbers get ``random.seed(0)`` and ``numpy.random.seed(0)`` through a
  ``sitecustomize`` module, so the eager and the fused run see the same data.
- NaiveBayes/GaussianNB.py and LogisticRegression/LR.py were written (Sept.-Nov. 2022) against scikit-learn
  1.1: GaussianNB calls ``BaseEstimator._validate_data`` (gone in 1.6) and LR imports
  ``sklearn.utils.fixes.delayed`` (gone in 1.5) and sklearn internals of that time. They run in a separate virtual
  environment, created once under ``~/.cache/kfuse-examples/sklearn-1.1.3`` from PyPI with SKLEARN_PINS (the
  release of the time and its NumPy/SciPy, NumPy >= 1.24 for kfuse), with this repository's kfuse on PYTHONPATH
  and kernels built against the Kokkos kfuse selects here (KFUSE_KOKKOS_ROOT). If it cannot be created they are
  skipped, naming the cause. The project's own environment keeps its newer scikit-learn.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import fnmatch
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parent.parent
SKLEARN_PINS = ("scikit-learn==1.1.3", "numpy==1.24.4", "scipy==1.9.3", "joblib==1.2.0", "threadpoolctl==3.1.0")
SKLEARN_VENV = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kfuse-examples"
                / "sklearn-1.1.3")
MASKED = "<masked>"

# Masks: regular expressions (multiline) whose groups, or whole match if they have none, become MASKED.
TIMER = r"time\(([^)\s]+)\)"  # pk.Timer readings printed as time(...)
BABEL_TABLE = r"^(?:Copy|Mul|Add|Triad|Dot) +(.+)$"  # MBytes/sec, min, max, average: padded to widths that vary
PARRES_RATE = (r"^Rate \(MB/s\): (\S+)$", r"^Avg time \(ms\): (\S+)$")
BENCH_RATES = r"Time: (\S+) Bandwidth: (\S+) GiB/s GFlop/s: (\S+)"
GATHER_RATE = r"GGather/s: (\S+)"
GUPS_RATE = r"^GUP/s Random: (\S+)$"
# ExaMiniMD: the two last columns of a thermo line (elapsed time, atom-steps/s) and the timings of the summary.
EXAMINIMD = (r"^\d+ \S+ \S+ \S+ (\S+) (\S+)$", r"^\d+ \d+ \| (.+) PERFORMANCE$")


def small_lj(cwd: Path, work: Path) -> None:
    """ExaMiniMD's input/in.lj with a 5x5x5-cell box (500 atoms) for 20 steps instead of 40^3 cells for 100."""
    text = (cwd / "input" / "in.lj").read_text()
    small, edits = re.subn(r"^region\s+box block .*$", "region box block 0 5 0 5 0 5", text, flags=re.M)
    small, runs = re.subn(r"^run\s+\d+", "run 20", small, flags=re.M)
    if (edits, runs) != (1, 1):
        raise ValueError(f"{cwd / 'input' / 'in.lj'} has no single 'region box block' and 'run' line to shrink")
    (work / "in.lj").write_text(small)


@dataclass(frozen=True)
class Program:
    """How to run one example: ``args`` ({work} is a private folder, filled by ``setup(cwd, work)``), ``cwd``
    relative to examples/ (default: the program's own folder), ``masks``, OpenMP ``threads``, and ``why`` these
    choices."""
    args: tuple = ()
    why: str = ""
    masks: tuple = ()
    cwd: Optional[str] = None
    setup: Optional[Callable[[Path, Path], None]] = None
    seed: bool = False
    sklearn: bool = False
    skip: Optional[str] = None
    threads: int = 1


def skipped(reason: str) -> Program:
    return Program(skip=reason)


WORKLOAD_TUTORIAL = ("-N", "6", "-M", "6", "-nrepeat", "10", "-space", "OpenMP")
TEAM_TUTORIAL = ("-N", "4", "-M", "4", "-E", "3", "-nrepeat", "10", "-space", "OpenMP")
TUTORIAL_WHY = "64x64 matrix (-N/-M are log2), 10 repeats; prints the Timer reading"
STANDALONE_WHY = "64x64 matrix (-N/-M are log2; repeats fixed in the program); prints the Timer reading"
EXAMINIMD_WHY = "run as its README says, from its folder, on a 500-atom copy of in.lj for 20 steps"

PROGRAMS = {
    # kokkos/: the Kokkos tutorial examples, fixed sizes, no arguments.
    "kokkos/05_simple_atomics.py": Program(seed=True, why="draws its data with unseeded random.randint"),
    "kokkos/random_sum.py": Program(seed=True, why="draws its data with unseeded random.randint"),
    "kokkos/scan_functor.py": Program(masks=(TIMER,), why="prints the Timer reading"),
    "kokkos/scan_standalone.py": Program(masks=(TIMER,), why="prints the Timer reading"),
    "kokkos/scan_workload.py": Program(masks=(TIMER,), why="prints the Timer reading"),
    # pykokkos/: feature examples.
    "pykokkos/from_array.py": skipped("needs CuPy and a GPU (pk.CudaSpace, RangePolicy(pk.Cuda))"),
    "pykokkos/multi_gpu.py": skipped("needs CuPy and two GPUs (pk.set_device_id, pk.Cuda)"),
    "pykokkos/streams.py": skipped("needs CuPy and a GPU (CUDA streams, pk.Cuda)"),
    # GPU-Puzzles: fixed sizes.
    "GPU-Puzzles/puzzle5.py": skipped("indexes out of bounds: launches SIZE*SIZE=4 threads on a 2x2 out, and reads "
                                      "b[j][0] of a 1x2 b for j=1"),
    # kokkos-tutorials: parse_args.py takes log2 sizes; -space names the execution space.
    "kokkos-tutorials/standalone/01.py": Program(("-N", "6", "-M", "6"), STANDALONE_WHY, (TIMER,)),
    "kokkos-tutorials/standalone/02.py": Program(("-N", "6", "-M", "6"), STANDALONE_WHY, (TIMER,)),
    "kokkos-tutorials/standalone/03.py": Program(("-N", "6", "-M", "6"), STANDALONE_WHY, (TIMER,)),
    "kokkos-tutorials/standalone/04.py": skipped("sets the GPU space itself: pk.set_default_space(pk.Cuda)"),
    "kokkos-tutorials/standalone/subview.py": Program(("-N", "6", "-M", "6", "-space", "OpenMP"), STANDALONE_WHY,
                                                      (TIMER,)),
    "kokkos-tutorials/standalone/team_policy.py": Program(("-N", "6", "-M", "6"), STANDALONE_WHY, (TIMER,)),
    "kokkos-tutorials/standalone/team_vector_loop.py": Program(
        ("-N", "4", "-M", "4", "-E", "3"), "8 teams of 16x16 (log2 sizes; E defaults to 1024), 1000 repeats fixed",
        (TIMER,)),
    **{f"kokkos-tutorials/workload/{name}.py": Program(WORKLOAD_TUTORIAL, TUTORIAL_WHY, (TIMER,))
       for name in ("01", "02", "03", "04", "mdrange", "subview", "team_policy")},
    **{f"kokkos-tutorials/workload/{name}.py": Program(TEAM_TUTORIAL, "8 teams of 16x16 (log2 sizes), 10 repeats",
                                                       (TIMER,))
       for name in ("team_scratch_memory", "team_vector_loop")},
    "pykokkos/team_thread_mdrange.py": Program(threads=16, why="its TeamPolicy(16, 16) needs teams of 16 threads"),
    # kokkos-benchmarks: positional sizes as in their "example args" comments, scaled down; team size 1 (one thread).
    "kokkos-benchmarks/standalone/bytes_and_flops.py": Program(
        ("2", "64", "32", "2", "1", "8", "4", "1", "0", "--execution_space", "OpenMP"),
        "P N K R D U F T S: 64 teams of 1 over 32 elements; prints rates", (BENCH_RATES,)),
    "kokkos-benchmarks/functor/bytes_and_flops.py": Program(
        ("2", "64", "32", "2", "1", "8", "4", "1", "0", "--execution_space", "OpenMP"),
        "P N K R D U F T S: 64 teams of 1 over 32 elements; prints rates", (BENCH_RATES,)),
    "kokkos-benchmarks/workload/bytes_and_flops.py": Program(
        ("2", "6", "32", "2", "1", "8", "4", "1", "0", "-space", "OpenMP"),
        "P N K R D U F T S (N is log2): 64 teams of 1 over 32 elements; prints rates", (BENCH_RATES,)),
    "kokkos-benchmarks/standalone/gather.py": Program(
        ("2", "64", "4", "8", "2", "8", "2", "--execution_space", "OpenMP"),
        "S N K D R U F: 64 entities gathering 4; prints rates", (BENCH_RATES, GATHER_RATE)),
    "kokkos-benchmarks/functor/gather.py": Program(
        ("2", "64", "4", "8", "2", "8", "2", "--execution_space", "OpenMP"),
        "S N K D R U F: 64 entities gathering 4; prints rates", (BENCH_RATES, GATHER_RATE)),
    "kokkos-benchmarks/workload/gather.py": Program(
        ("2", "6", "4", "8", "2", "8", "2", "-space", "OpenMP"),
        "S N K D R U F (N is log2): 64 entities gathering 4, drawn with unseeded np.random; prints rates",
        (BENCH_RATES, GATHER_RATE), seed=True),
    "kokkos-benchmarks/standalone/gups.py": Program(
        ("--indices", "64", "--data", "256", "--repeats", "2", "--execution_space", "OpenMP"),
        "64 updates of 256 elements, twice (seeded); prints the rate", (GUPS_RATE,)),
    "kokkos-benchmarks/functor/gups.py": Program(
        ("--indices", "64", "--data", "256", "--repeats", "2", "--execution_space", "OpenMP"),
        "64 updates of 256 elements, twice (seeded); prints the rate", (GUPS_RATE,)),
    "kokkos-benchmarks/workload/gups.py": Program(
        ("--indices", "6", "--data", "8", "--repeats", "2", "-space", "OpenMP"),
        "64 updates of 256 elements (log2 sizes), twice; prints the rate", (GUPS_RATE,)),
    # BabelStream: -s elements (log2 in workload/), -n repeats; prints a table of rates and times.
    "BabelStream/standalone/babel_stream.py": Program(("-s", "1024", "-n", "4", "-space", "OpenMP"),
                                                      "1024 elements, 4 times", (BABEL_TABLE,)),
    "BabelStream/functor/babel_stream.py": Program(("-s", "1024", "-n", "4", "-space", "OpenMP"),
                                                   "1024 elements, 4 times", (BABEL_TABLE,)),
    "BabelStream/workload/babel_stream.py": Program(("-s", "10", "-n", "4", "-space", "OpenMP"),
                                                    "1024 elements (log2), 4 times; prints no timing"),
    # ParRes: positional iterations and size (log2 in workload/).
    "ParRes/standalone/nstream.py": Program(("4", "1024"), "4 iterations of 1024 elements; prints rate and time",
                                            PARRES_RATE),
    "ParRes/functor/nstream.py": Program(("4", "1024"), "4 iterations of 1024 elements; prints rate and time",
                                         PARRES_RATE),
    "ParRes/workload/nstream.py": Program(("4", "10", "-space", "OpenMP"),
                                          "4 iterations of 1024 elements (log2); prints rate and time", PARRES_RATE),
    "ParRes/workload/stencil.py": Program(("4", "5", "-space", "OpenMP"),
                                          "4 iterations on a 32x32 grid (log2), radius 2; prints no timing"),
    "ParRes/workload/transpose.py": Program(("4", "5", "-space", "OpenMP"),
                                            "4 iterations on a 32x32 matrix (log2); prints no timing"),
    "graphs/bfs_bottomup.py": Program(("-N", "3", "-M", "3", "-space", "OpenMP"), "8x8 grid (log2 sizes)"),
    **{f"ExaMiniMD/{kind}/src/main.py": Program(("-il", "{work}/in.lj", "--fill"), EXAMINIMD_WHY, EXAMINIMD,
                                                cwd=f"ExaMiniMD/{kind}", setup=small_lj)
       for kind in ("standalone", "workload")},
    "NaiveBayes/GaussianNB.py": Program(sklearn=True, why="iris data; needs scikit-learn 1.1 (see the docstring)"),
    "LogisticRegression/LR.py": Program(sklearn=True, why="iris data; needs scikit-learn 1.1 (see the docstring)"),
}
# Modules the programs import, not programs (fnmatch patterns, relative to examples/; PROGRAMS entries win).
HELPERS = ("kokkos-tutorials/*/parse_args.py", "ExaMiniMD/*/src/*")


@dataclass(frozen=True)
class Result:
    path: str
    verdict: str  # PASS, FAIL(eager), FAIL(fused), FAIL(differs), SKIP
    detail: str = ""


def programs(examples: Path, only: str) -> list:
    """(path relative to examples/, Program) for every program in the checkout whose path contains ``only``."""
    found = []
    for file in sorted(examples.rglob("*.py")):
        path = file.relative_to(examples).as_posix()
        if only in path and (path in PROGRAMS or not any(fnmatch.fnmatch(path, h) for h in HELPERS)):
            found.append((path, PROGRAMS.get(path, Program())))
    return found


def mask(text: str, masks: tuple) -> str:
    """``text`` with what each of ``masks`` matches hidden (see TIMER and the others)."""
    for pattern in masks:
        text = re.sub(pattern, _hide, text, flags=re.M)
    return text


def _hide(match: re.Match) -> str:
    """The match with its groups (or all of it, if it has none) replaced by MASKED."""
    spans = [match.span(g) for g in range(1, match.re.groups + 1)] or [match.span()]
    out, at = [], match.start()
    for start, end in spans:
        out += [match.string[at:start], MASKED]
        at = end
    return "".join(out) + match.string[at:match.end()]


def last_error(stderr: str, stdout: str, cwd: Path, examples: Path) -> str:
    """The exception a program ended with, ``Type: message (where)``, else the last line it printed. ``where`` is
    the innermost frame in the examples (the program's line that failed) and, when another frame is deeper
    (kfuse's, a library's), that one too, as ``program.py:12 > kfuse/dispatch.py:126``."""
    lines = stderr.splitlines()
    starts = [n for n, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        tail = [line for line in (stderr or stdout).splitlines() if line.strip()]
        return tail[-1][:300] if tail else "(no output)"
    frames, error = [], ""
    for line in lines[starts[-1] + 1:]:
        frame = re.match(r'\s+File "(.+)", line (\d+)', line)
        if frame:
            frames.append((cwd / frame[1], frame[2]))
            error = ""
        elif not error and line and not line[0].isspace():
            error = line
    places = [f for f in frames if f[0].resolve().is_relative_to(examples.resolve())][-1:] + frames[-1:]
    shown = [f"{short(file, examples)}:{line}" for file, line in dict.fromkeys(places)]
    return f"{error[:300]} ({' > '.join(shown)})" if shown else error[:300]


def short(file: Path, examples: Path) -> str:
    """A frame's file relative to the examples or to this repository, else its name."""
    for base in (examples, REPO):
        if file.resolve().is_relative_to(base.resolve()):
            return file.resolve().relative_to(base.resolve()).as_posix()
    return file.name


def run_once(command: list, cwd: Path, env: dict, timeout: float) -> tuple:
    """(exit status, stdout, stderr); a run past ``timeout`` is killed with its children (g++) and gets None."""
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace", start_new_session=True) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            return None, out, err + f"\ntimed out after {timeout:g} s"
        return child.returncode, out, err


def first_difference(eager: str, fused: str) -> str:
    a, b = eager.splitlines(), fused.splitlines()
    n = next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    def show(lines):
        return repr(lines[n][:120]) if n < len(lines) else "(end of output)"
    return f"stdout line {n + 1}: eager {show(a)}, fused {show(b)}"


def check(path: str, program: Program, examples: Path, python: str, timeout: float) -> Result:
    """Run one program eager, then fused (unless eager failed), and compare their masked stdout."""
    if program.skip:
        return Result(path, "SKIP", program.skip)
    cwd = examples / (program.cwd or Path(path).parent)
    with tempfile.TemporaryDirectory(prefix="kfuse-example-") as work:
        if program.setup:
            program.setup(cwd, Path(work))
        env = child_environment(Path(work), program)
        script = os.path.relpath(examples / path, cwd)
        args = [a.replace("{work}", work) for a in program.args]
        outputs = []
        for mode, switch in (("eager", []), ("fused", ["--fusion"])):
            code, out, err = run_once([python, "-m", "kfuse", "run", *switch, script, *args], cwd, env, timeout)
            if code != 0:
                return Result(path, f"FAIL({mode})", last_error(err, out, cwd, examples))
            outputs.append(mask(out, program.masks))
    if outputs[0] != outputs[1]:
        return Result(path, "FAIL(differs)", first_difference(*outputs))
    return Result(path, "PASS")


def child_environment(work: Path, program: Program) -> dict:
    """This environment with CUDA off, the program's OpenMP threads (one unless its teams need more), fusion left
    to the switch, this repository's kfuse first on the path, and for seeded programs a sitecustomize that seeds
    ``random`` and ``numpy.random``."""
    env = {k: v for k, v in os.environ.items() if k != "KFUSE_FUSION"}
    env.update(CUDA_VISIBLE_DEVICES="", KFUSE_DEFAULT_SPACE="OpenMP", KFUSE_NUM_THREADS=str(program.threads))
    path = [str(REPO)]
    if program.seed:
        (work / "sitecustomize.py").write_text("import random\nimport numpy\nrandom.seed(0)\nnumpy.random.seed(0)\n")
        path.insert(0, str(work))
    env["PYTHONPATH"] = os.pathsep.join(path + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if program.sklearn:
        env.setdefault("KFUSE_KOKKOS_ROOT", kokkos_root())  # that environment would not see one in this sys.prefix
    return env


def kokkos_root() -> str:
    """The Kokkos kfuse compiles against when run from this environment (found, or built on first use)."""
    from kfuse.kokkos import provision  # kfuse is installed in this environment (scripts/setup.sh)

    return provision.selected().root


def sklearn_python() -> tuple:
    """(interpreter of the scikit-learn 1.1.3 environment, None), created on first use; (None, why) if it can't be."""
    python = SKLEARN_VENV / "bin" / "python"
    ready = SKLEARN_VENV / "ready"
    if ready.exists():
        return str(python), None
    print(f"creating {SKLEARN_VENV} ({' '.join(SKLEARN_PINS)}) ...", flush=True)
    for command in ([sys.executable, "-m", "venv", "--clear", str(SKLEARN_VENV)],
                    [str(python), "-m", "pip", "install", "--quiet", *SKLEARN_PINS]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()
            return None, tail[-1] if tail else f"{command[2]} exited with {done.returncode}"
    ready.write_text("\n".join(SKLEARN_PINS) + "\n")
    return str(python), None


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a PyKokkos repository checkout (its examples/ are run)")
    parser.add_argument("--only", default="", help="run only programs whose path contains this")
    parser.add_argument("--jobs", type=int, default=2, help="programs run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run (default 300)")
    options = parser.parse_args(argv)
    examples = options.checkout / "examples"
    if not examples.is_dir():
        parser.error(f"{examples} is not a folder")
    chosen = programs(examples, options.only)
    sklearn, why = sklearn_python() if any(p.sklearn and not p.skip for _, p in chosen) else (None, None)
    if why:
        chosen = [(path, skipped(f"needs scikit-learn 1.1.3, whose environment could not be created: {why}")
                   if p.sklearn else p) for path, p in chosen]

    def one(item):
        path, program = item
        return check(path, program, examples, sklearn if program.sklearn else sys.executable, options.timeout)

    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        for result in pool.map(one, chosen):
            print(f"{result.verdict:<14} {result.path}" + (f"  {result.detail}" if result.detail else ""), flush=True)
            results.append(result)
    run = [r for r in results if r.verdict != "SKIP"]
    passed = sum(r.verdict == "PASS" for r in run)
    print(f"{passed} of {len(run)} programs pass ({len(results) - len(run)} skipped)")
    return 0 if passed == len(run) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
