"""Process-level tracer behaviour, each in a fresh interpreter: the KFUSE_FUSION switch, work still
pending at exit, and the KFUSE_MAX_TRACE bound read from the environment."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

# Kernel printf goes through C stdio, Python print through sys.stdout: the script flushes both after
# every step so the captured order is the order things happened in.
_PRELUDE = '''
import ctypes, sys
import numpy as np
import kfuse as pk

_libc = ctypes.CDLL(None)

def say(text):
    sys.stdout.flush()
    _libc.fflush(None)
    print(text, flush=True)

@pk.workunit
def k_print(i: int, tag: int):
    pk.printf("kernel %d\\n", tag)

@pk.workunit
def k_double(i: int, x: pk.View1D[pk.double]):
    x[i] = 2.0 * x[i]

@pk.workunit
def k_total(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]

@pk.workunit
def k_divide(i: int, x: pk.View1D[pk.int64], by: int):
    x[i] = i // by
'''


def run_script(tmp_path: Path, body: str, **env) -> subprocess.CompletedProcess:
    script = tmp_path / "prog.py"
    script.write_text(_PRELUDE + textwrap.dedent(body))
    # Drop the tracing switches under test; keep where kernels are built and run (cache, Kokkos, space).
    keep = ("KFUSE_CACHE_DIR", "KFUSE_KOKKOS_ROOT", "KFUSE_DEFAULT_SPACE", "KFUSE_GPU_ARCH")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KFUSE_") or k in keep}
    full_env.update(env)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=full_env,
                          timeout=300)


def lines(proc) -> list:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


_PRINT_PROGRAM = '''
pk.enable_fusion()
for tag in (1, 2):
    pk.parallel_for(1, k_print, tag=tag)
    say(f"host {tag} launched={pk.stats()['kernels_launched']} traced={pk.stats()['ops_traced']}")
say("end of program")
'''


def test_fusion_0_forces_eager_even_if_program_enables_it(tmp_path):
    out = lines(run_script(tmp_path, _PRINT_PROGRAM + '''
assert not pk.fusion_enabled()
x = pk.View(4); x.fill(1.5)
r = pk.parallel_reduce(4, k_total, x=x)
say(f"reduce type={type(r).__name__} value={r}")
''', KFUSE_FUSION="0"))
    assert out == ["kernel 1", "host 1 launched=1 traced=0", "kernel 2", "host 2 launched=2 traced=0",
                   "end of program", "reduce type=float value=6.0"]


def test_printing_kernels_run_at_their_call_under_fusion(tmp_path):
    proc = run_script(tmp_path, _PRINT_PROGRAM)
    assert lines(proc) == ["kernel 1", "host 1 launched=1 traced=1", "kernel 2", "host 2 launched=2 traced=2",
                           "end of program"]
    assert "failed" not in proc.stderr


def test_pending_kernels_run_at_exit(tmp_path):
    """Nothing reads the kernel's result: it runs at exit, where its fault is reported and sets the status."""
    proc = run_script(tmp_path, '''
pk.enable_fusion()
x = pk.View(4, pk.int64)
pk.parallel_for(4, k_divide, x=x, by=0)
say(f"end of program launched={pk.stats()['kernels_launched']}")
''')
    assert proc.stdout.splitlines() == ["end of program launched=0"]
    assert proc.returncode == 1 and "k_divide" in proc.stderr and "never read" in proc.stderr, proc.stderr


def test_fence_runs_pending_kernels(tmp_path):
    out = lines(run_script(tmp_path, '''
pk.enable_fusion()
x = pk.View(4)
pk.parallel_for(4, k_double, x=x)
say(f"before fence launched={pk.stats()['kernels_launched']}")
pk.fence()
say(f"after fence launched={pk.stats()['kernels_launched']}")
'''))
    assert out == ["before fence launched=0", "after fence launched=1"]


def test_fusion_1_traces_an_unmodified_program(tmp_path):
    out = lines(run_script(tmp_path, '''
x = pk.View(8)
x[:] = np.arange(8.0)
pk.parallel_for(8, k_double, x=x)
pk.parallel_for(8, k_double, x=x)
r = pk.parallel_reduce(8, k_total, x=x)
say(f"enabled={pk.fusion_enabled()} traced={pk.stats()['ops_traced']} launched={pk.stats()['kernels_launched']} "
    f"future={isinstance(r, pk.Future)}")
say(f"total={r:.1f} x={np.asarray(x).tolist()}")
''', KFUSE_FUSION="1"))
    assert out == ["enabled=True traced=3 launched=0 future=True",
                   f"total={4 * sum(range(8)):.1f} x={[4.0 * k for k in range(8)]}"]


def test_unmodified_program_is_eager_by_default(tmp_path):
    out = lines(run_script(tmp_path, '''
x = pk.View(8)
x.fill(1.0)
pk.parallel_for(8, k_double, x=x)
say(f"enabled={pk.fusion_enabled()} launched={pk.stats()['kernels_launched']} x0={x[0]}")
'''))
    assert out == ["enabled=False launched=1 x0=2.0"]


def test_max_trace_from_environment(tmp_path):
    out = lines(run_script(tmp_path, '''
from kfuse import context
pk.enable_fusion(trace_only=True)
x = pk.View(4)
x.fill(1.0)
sizes = []
for _ in range(7):
    pk.parallel_for(4, k_double, x=x)
    sizes.append(len(context.current().trace))
say(f"sizes={sizes} flushes={pk.stats()['flushes']} launched={pk.stats()['kernels_launched']} x={x[0]}")
''', KFUSE_MAX_TRACE="3"))
    assert out == [f"sizes={[1, 2, 0, 1, 2, 0, 1]} flushes=2 launched=6 x={2.0 ** 7}"]


def test_failing_pending_kernel_at_exit_is_reported(tmp_path):
    proc = run_script(tmp_path, '''
from kfuse.backends import kokkos
real = kokkos.generate
def broken(src, spec, name, *restrict):
    gen = real(src, spec, name, *restrict)
    return type(gen)(gen.name, gen.source + "\\nstatic_assert(false, \\"exit breakage\\");\\n", gen.slot_format,
                     gen.result_format)
kokkos.generate = broken
pk.enable_fusion()
@pk.workunit
def k_exit_broken(i: int, x: pk.View1D[pk.double]):
    x[i] = x[i] + 1.0
x = pk.View(4)
pk.parallel_for(4, k_exit_broken, x=x)
say("end of program")
''')
    assert proc.returncode == 1, proc.stderr  # a lost failure is an error exit, not a note on stderr
    assert proc.stdout.splitlines() == ["end of program"]
    assert "failed and its results were never read" in proc.stderr and "k_exit_broken" in proc.stderr
    assert "prog.py:" in proc.stderr and "exit breakage" in proc.stderr
