"""``python -m kfuse run``: unmodified PyKokkos programs (``import pykokkos as pk``) run on kfuse, eager and fused.

Each program is written here and run in a child process, as a user would run it; the kernels run on the
reference interpreter (KFUSE_BACKEND=python), since what is tested is the command, not compiled code.
"""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kfuse import config

STANDALONE = '''
import json
import sys

import numpy as np
import pykokkos as pk
from pykokkos import View, double, parallel_for


@pk.workunit
def axpy(i, y, x, a):
    y[i] = a * x[i] + y[i]


@pk.workunit
def square(i, z, y):
    z[i] = y[i] * y[i]


@pk.workunit
def total(i, acc, z):
    acc += z[i]


if __name__ == "__main__":
    n = int(sys.argv[1])
    x, y, z = View([n], double), View([n], double), View([n], double)
    x[:] = np.arange(n)
    y[:] = 1.0
    parallel_for(n, axpy, y=y, x=x, a=2.0)
    parallel_for(n, square, z=z, y=y)
    s = pk.parallel_reduce(n, total, z=z)
    print(json.dumps({"z": np.asarray(z).tolist(), "sum": float(s), "fusion": pk.fusion_enabled(),
                      "fused": pk.stats()["fused_kernels_launched"]}))
'''


def run(folder, source, *args, cwd=None, **settings):
    """Write ``source`` to ``folder/program.py`` and run ``python -m kfuse run *args`` there (or in ``cwd``) with
    these kfuse settings (Setting names of kfuse.config; the fixtures keep the parent's KFUSE_FUSION unset)."""
    (folder / "program.py").write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, "-m", "kfuse", "run", *args], capture_output=True, text=True,
                          env=config.child_environment(BACKEND="python", **settings), cwd=cwd or folder, timeout=120)


@pytest.mark.parametrize("switch, settings", [((), {}), (("--fusion",), {}), ((), {"FUSION": 1})],
                         ids=["eager", "--fusion", "KFUSE_FUSION=1"])
def test_an_unmodified_pykokkos_program_runs_eager_and_fused_equal_to_numpy(tmp_path, switch, settings):
    done = run(tmp_path, STANDALONE, *switch, "program.py", "64", **settings)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    y = 2.0 * np.arange(64) + 1.0
    assert out["z"] == (y * y).tolist()
    assert out["sum"] == pytest.approx(float(np.sum(y * y)))
    fused = bool(switch or settings)
    assert out["fusion"] is fused
    assert (out["fused"] > 0) is fused


def test_the_program_gets_its_argv_name_and_folder_and_its_own_modules_import_pykokkos(tmp_path):
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "helper.py").write_text("import pykokkos as pk\nKFUSE = pk.__name__\n")
    done = run(folder, '''
        import sys
        import helper
        print(repr((sys.argv, __name__, sys.path[0], helper.KFUSE)))
        ''', "--fusion", "prog/program.py", "-n", "3", "--fusion", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr((["prog/program.py", "-n", "3", "--fusion"], "__main__", str(folder),
                                        "kfuse"))


def test_exit_status_and_traceback_are_the_programs(tmp_path):
    assert run(tmp_path, "import sys\nsys.exit(3)\n", "program.py").returncode == 3
    done = run(tmp_path, "import pykokkos\n\ndef f():\n    raise ValueError('boom')\n\nf()\n", "program.py")
    assert done.returncode == 1
    assert done.stderr.startswith('Traceback (most recent call last):\n  File "program.py", line 6, in <module>')
    assert done.stderr.rstrip().endswith("ValueError: boom")
    assert "runpy" not in done.stderr and "kfuse" not in done.stderr


def test_a_pykokkos_submodule_kfuse_lacks_is_a_clear_import_error(tmp_path):
    done = run(tmp_path, '''
        try:
            from pykokkos.lib import ufuncs
        except ImportError as error:
            print(error.name)
        import pykokkos.interface.data_types
        ''', "program.py")
    assert done.returncode == 1
    assert done.stdout == "pykokkos.lib\n"
    assert ("No module named 'pykokkos.interface': kfuse does not provide this PyKokkos submodule yet"
            in done.stderr)


def test_pykokkos_is_not_importable_outside_kfuse_run():
    done = subprocess.run([sys.executable, "-c", "import pykokkos"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "ModuleNotFoundError: No module named 'pykokkos'" in done.stderr


def test_explain_prints_the_groups_of_the_whole_run_to_stderr(tmp_path):
    done = run(tmp_path, STANDALONE, "--fusion", "--explain", "program.py", "8")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["fused"] == 1  # the program's own output is unchanged
    assert "kfuse: 1 flushes, 3 calls -> 1 kernel launches" in done.stderr
    assert "1x  axpy + square + total" in done.stderr, done.stderr


def test_explain_summary_counts_groups_and_splits():
    from kfuse.fuser.explain import FlushRecord, summary
    from kfuse.fuser.planner import Reason, Split

    split = Reason(Split.NOT_THREAD_LOCAL, "c reads x[i - 1], written by another thread")
    records = [FlushRecord(k, ["a", "b", "c"], [[0, 1], [2]], [(2, split)], 0.0, False, True) for k in range(3)]
    text = summary(records)
    assert "3 flushes, 9 calls -> 6 kernel launches" in text and "3x  a + b" in text
    assert "calls run alone: c (3x)" in text and "splits (times): access not local to its thread (3x)" in text
