"""scripts/pykokkos_examples.py on a tiny fake PyKokkos checkout: its verdicts, masks, skips, count and exit status.

The fake programs are written here (no PyKokkos checkout needed) and their kernels run on the reference
interpreter (KFUSE_BACKEND=python), so no compiler runs.
"""
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

from kfuse import config

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "pykokkos_examples.py"

PROGRAMS = {
    # Passes: a kernel, then its result.
    "basic/double.py": '''
        import pykokkos as pk

        @pk.workunit
        def double(i, v):
            v[i] = 2 * i

        v = pk.View([4], pk.int32)
        pk.parallel_for(4, double, v=v)
        print(v)
    ''',
    # A real PyKokkos path: passes only because the script masks its rate and time lines (results stay).
    "ParRes/standalone/nstream.py": '''
        import time
        print("Solution validates")
        print("Rate (MB/s): %.2f" % (1 / (time.perf_counter_ns() % 997 + 1)))
        print("Avg time (ms): %f" % time.perf_counter())
    ''',
    "basic/differs.py": '''
        import pykokkos as pk
        print("fusion" if pk.fusion_enabled() else "eager")
    ''',
    "basic/fails.py": '''
        def compute():
            raise ValueError("no such thing")

        compute()
    ''',
    "basic/fails_fused.py": '''
        import pykokkos as pk
        if pk.fusion_enabled():
            raise RuntimeError("only with fusion")
    ''',
    "pykokkos/multi_gpu.py": "raise SystemExit('a skipped program must not run')",
    "kokkos-tutorials/workload/parse_args.py": "raise SystemExit('a helper module must not run')",
}


def test_the_script_gives_each_program_its_verdict_and_counts_them(tmp_path):
    for path, source in PROGRAMS.items():
        (tmp_path / "examples" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "examples" / path).write_text(textwrap.dedent(source))
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--jobs", "2", "--timeout", "120"],
                          capture_output=True, text=True, env=config.child_environment(BACKEND="python"), timeout=300)
    lines = {line.split()[1]: line for line in done.stdout.splitlines()[:-1]}
    assert sorted(lines) == sorted(p for p in PROGRAMS if "parse_args" not in p), done.stdout + done.stderr
    assert lines["basic/double.py"].split() == ["PASS", "basic/double.py"]
    assert lines["ParRes/standalone/nstream.py"].startswith("PASS ")
    assert lines["basic/differs.py"].split(None, 2) == [
        "FAIL(differs)", "basic/differs.py", "stdout line 1: eager 'eager', fused 'fusion'"]
    assert lines["basic/fails.py"].split(None, 2) == [
        "FAIL(eager)", "basic/fails.py", "ValueError: no such thing (basic/fails.py:3)"]
    assert lines["basic/fails_fused.py"].split(None, 2)[::2] == [
        "FAIL(fused)", "RuntimeError: only with fusion (basic/fails_fused.py:4)"]
    assert lines["pykokkos/multi_gpu.py"].startswith("SKIP ") and "GPU" in lines["pykokkos/multi_gpu.py"]
    assert done.stdout.splitlines()[-1] == "2 of 5 programs pass (1 skipped)"
    assert done.returncode == 1


def test_masks_hide_only_their_groups(monkeypatch):
    spec = importlib.util.spec_from_file_location("pykokkos_examples", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # its dataclasses look their module up
    spec.loader.exec_module(script)
    out = "N(64) M(64) nrepeat(10) problem(MB) time(0.0123) bandwidth(GB/s)\nresult time(1)\n"
    assert script.mask(out, (script.TIMER,)) == ("N(64) M(64) nrepeat(10) problem(MB) time(<masked>) bandwidth(GB/s)"
                                                 "\nresult time(<masked>)\n")
    thermo = "10 1.234567 -5.000000 -3.100000 0.052341 9.551000e+04\n"
    assert script.mask(thermo, script.EXAMINIMD) == "10 1.234567 -5.000000 -3.100000 <masked> <masked>\n"
