"""The differential-test program model, for tests: it lives in :mod:`kfuse.check` (so users and CI can run
the fuzzer too); this module gives tests its names and two short helpers.

``run_program(steps, mode)`` runs one program in a mode of :data:`MODES`; ``assert_same(eager, other)``
fails with every mismatch :func:`kfuse.check.compare` finds.
"""
from __future__ import annotations

import pytest
from hypothesis import strategies as st

import kfuse as pk
from kfuse.check import EAGER, FUSED, TRACED, Case, check, compare, run
from kfuse.check.arrays import N  # noqa: F401 - re-exported for tests
from kfuse.check.generate import case as random_case
from kfuse.check.kernels import k_axpy, k_dot, k_scale, k_scan, k_sin, k_stencil  # noqa: F401 - re-exported
from kfuse.check.program import Call, Export, Fence, Read, Realloc, UseResult, Write  # noqa: F401 - re-exported
from kfuse.check.host import READS, USES, WRITES  # noqa: F401 - re-exported
from kfuse import context

#: mode name -> kfuse.check mode; every differential test compares each mode but "eager" against "eager".
MODES = {"eager": EAGER, "traced": TRACED, "fused": FUSED}


@pytest.fixture(autouse=True)
def runs_clean_up():
    """Import into a test module: kfuse.check runs turn tracing on themselves, and must leave it off with
    nothing pending."""
    yield
    assert not pk.fusion_enabled()
    assert len(context.current().trace) == 0


def run_program(steps, mode: str):
    return run(Case.of(steps), MODES[mode])


def assert_same(expected, got, context: str = "") -> None:
    mismatches = compare(expected, got)
    assert not mismatches, f"{context}:\n" + "\n".join(mismatches)


def assert_case_agrees(case: Case) -> None:
    """Eager against every mode kfuse.check runs the case in (traced, fused, small trace, threads)."""
    mismatches = check(case)
    assert not mismatches, "\n".join(mismatches)


class HypothesisChooser:
    """The chooser kfuse.check's generator draws through, backed by Hypothesis (which then shrinks)."""

    def __init__(self, draw):
        self._draw = draw

    def choice(self, options):
        return self._draw(st.sampled_from(list(options)))

    def integer(self, low: int, high: int) -> int:
        return self._draw(st.integers(low, high))


@st.composite
def random_cases(draw):
    return random_case(HypothesisChooser(draw))
