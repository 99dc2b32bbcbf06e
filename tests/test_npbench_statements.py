"""The NPBench subjects written as PyKokkos ports (examples/npbench/<name>_statements.py: one kernel per NumPy
statement, NPBench's loops in Python), compiled: eager and fused give the same bits, both match the bench's NumPy
baseline, and the fused run forms the groups each module's docstring designs, call for call."""
import sys
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.bench import numpy_refs, report, subjects
from kfuse.fuser.planner import Split

from fusion_check import assert_same, run_eager_and_fused

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the examples are imported as a package from the repository root
    sys.path.insert(0, str(ROOT))

from examples.npbench import (adi_statements, covariance_statements, fdtd_2d_statements,  # noqa: E402
                              jacobi_1d_statements, mvt_statements, syr2k_statements, syrk_statements)
from examples.npbench.common import random_matrix  # noqa: E402

# The "small" size, or less where a group would pass KFUSE_MAX_GROUP (32 calls) and be cut by it: adi's sweep is
# 3N - 2 calls (N = 7: 19, the paper's A 0..A 4 together), syrk's and syr2k's row M + 1.
INPUTS = {
    adi_statements: lambda: {"TSTEPS": 2, "N": 7, "u": random_matrix(61, 7, 7)},
    covariance_statements: lambda: covariance_statements.initialize("small"),
    fdtd_2d_statements: lambda: fdtd_2d_statements.initialize("small"),
    jacobi_1d_statements: lambda: jacobi_1d_statements.initialize("small"),
    mvt_statements: lambda: mvt_statements.initialize("small"),
    syrk_statements: lambda: {"alpha": 1.5, "beta": 1.2, "C": random_matrix(21, 12, 12),
                              "A": random_matrix(22, 12, 7)},
    syr2k_statements: lambda: {"alpha": 1.5, "beta": 1.2, "C": random_matrix(31, 12, 12),
                               "A": random_matrix(32, 12, 7), "B": random_matrix(33, 12, 7)},
}


def _sweeps(p):
    """adi: one group per sweep, its 3N - 2 statements; the next sweep's first statement overwrites line 0 of the
    array this sweep's q_forward read across lines."""
    column = ("fill_row", "fill_column", "q_start_from_row") + ("p_forward", "q_forward_columns") * (p["N"] - 2) \
        + ("fill_row",) + ("v_backward",) * (p["N"] - 2)
    row = ("fill_column", "fill_column", "q_start_from_column") + ("p_forward", "q_forward_rows") * (p["N"] - 2) \
        + ("fill_column",) + ("u_backward",) * (p["N"] - 2)
    return [column, row] * p["TSTEPS"]


def _rows(update):
    """syrk, syr2k: per row of C, the scaling and the M updates of that row's range."""
    return lambda p: [("scale_row",) + (update,) * p["A"].shape[1]] * p["A"].shape[0]


# The groups of one fused run, in trace order, by their calls' workunits (each module's docstring says why).
GROUPS = {
    adi_statements: _sweeps,
    covariance_statements: lambda p: [("column_mean", "center_column", "zero_row")]
    + [("covariance_row",)] * p["data"].shape[1],
    fdtd_2d_statements: lambda p: [("ey_top", "ey_update", "ex_update"), ("hz_update",)] * p["TMAX"],
    jacobi_1d_statements: lambda p: [("average3",), ("average3",)] * p["TSTEPS"],
    mvt_statements: lambda p: [("add_matvec", "add_matvec_transposed")],
    syrk_statements: _rows("add_rank1"),
    syr2k_statements: _rows("add_rank2"),
}
# Why each group after the first starts (planner.Split): a read of another thread's element, or another range.
LOCAL, RANGE = Split.NOT_THREAD_LOCAL, Split.RANGE
SPLITS = {
    adi_statements: lambda p: [LOCAL] * (2 * p["TSTEPS"] - 1),
    covariance_statements: lambda p: [LOCAL] + [RANGE] * (p["data"].shape[1] - 1),
    fdtd_2d_statements: lambda p: [RANGE] * (2 * p["TMAX"] - 1),
    jacobi_1d_statements: lambda p: [LOCAL] * (2 * p["TSTEPS"] - 1),
    mvt_statements: lambda p: [],
    syrk_statements: lambda p: [RANGE] * (p["A"].shape[0] - 1),
    syr2k_statements: lambda p: [RANGE] * (p["A"].shape[0] - 1),
}
SUBJECTS = pytest.mark.parametrize("module", list(INPUTS), ids=lambda m: m.__name__.rsplit(".", 1)[-1])


def as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def reference(module, inputs) -> tuple:
    """The bench's NumPy baseline of the subject (kfuse/bench/numpy_refs.py), which run_kfuse must return."""
    return as_tuple(getattr(numpy_refs, subjects.npbench_name(module.__name__.rsplit(".", 1)[-1]))(**inputs))


@SUBJECTS
def test_eager_and_fused_agree_bit_for_bit_and_match_numpy(module):
    inputs = INPUTS[module]()
    before = {k: v.copy() for k, v in inputs.items() if isinstance(v, np.ndarray)}
    eager, fused, stats, text = run_eager_and_fused(lambda: as_tuple(module.run_kfuse(**inputs)))
    assert stats["ops_traced"] > 0 and stats["kernels_launched"] > 0, text
    assert_same(eager, fused)
    want = reference(module, inputs)
    assert len(fused) == len(want)
    for got, w in zip(fused, want):
        assert got.shape == w.shape
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-13 * np.abs(w).max())
    for k, v in before.items():
        np.testing.assert_array_equal(inputs[k], v, err_msg=f"run_kfuse changed its input '{k}'")


@SUBJECTS
def test_fused_run_forms_the_designed_groups(module):
    inputs = INPUTS[module]()
    records = []
    context.current().record_sink = records
    pk.reset_stats()
    with pk.fusion():
        module.run_kfuse(**inputs)
    explained = "\n".join(r.text() for r in records)
    got = [tuple(rec.call_names[i] for i in g) for rec in records for g in rec.groups]
    assert got == GROUPS[module](inputs), explained
    for rec in records:  # every group of several calls ran as one fused kernel
        for g in rec.groups:
            assert len(g) == 1 or (not rec.apart(g) and rec.kernels.get(g[0])), explained
    assert [reason.kind for rec in records for _, reason in rec.boundaries] == SPLITS[module](inputs), explained
    launched, traced = pk.stats()["kernels_launched"], pk.stats()["ops_traced"]
    assert launched == len(got) and traced == sum(map(len, got))
    assert launched < traced or module is jacobi_1d_statements  # jacobi: no group, every call runs alone


def test_statement_subjects_follow_the_npbench_block_and_share_its_paper_rows():
    assert subjects.ORDER.index("adi_statements") == subjects.ORDER.index(subjects.NPBENCH[-1]) + 1
    assert subjects.NPBENCH_STATEMENTS == tuple(f"{n}_statements" for n in subjects.NPBENCH)
    for name in subjects.NPBENCH_STATEMENTS:
        subject = subjects.load(name)
        assert subject.numpy is not None and subject.check is not None
    spread = {"median": 1.0, "min": 1.0, "max": 1.0}
    result = {"groups": [], "eager_s": spread, "trace_s": spread, "fused_uo_s": spread, "fused_s": spread,
              "fused_vs_eager_speedup": 1.0, "trace_overhead_pct": 0.0, "analysis_ms": spread}
    machine = {"platform": "p", "cpus_usable": 2, "cpu_count": 2, "kfuse_num_threads": 1, "load_average_1min": 0.0,
               "compiler": "g++", "opt_flags": "-O3", "kokkos_version": "x", "kokkos_backends": ["OPENMP"],
               "python": "3"}
    text = report.markdown({"machine": machine, "size": "small", "repeat": 1,
                            "subjects": {"adi": result, "mvt": result, "adi_statements": result}})
    paper = text[text.index("## Ours next to the paper"):text.index("## End to end")]
    rows = [line for line in paper.splitlines() if line.startswith(("| adi", "| mvt"))]
    assert [r.split(" | ")[0] for r in rows] == ["| adi", "| adi_statements", "| mvt"]
    assert "A 0 (5) 4.12/3.69" in rows[1] and "M (2)" in rows[2]
