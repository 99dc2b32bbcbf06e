"""What a traceback shows when kfuse raises: the user's own frames and kfuse's message, at most two frames of
kfuse (all of them under KFUSE_DEBUG=1); kfuse's own bugs as InternalError; the user's exceptions untouched."""
import importlib.util
import math
import os
import traceback

import numpy as np
import pytest

import kfuse as pk
from kfuse.frontend import workunit as workunit_module
from kfuse import dispatch
from kfuse.backends import kokkos

KFUSE_DIR = os.path.dirname(os.path.abspath(pk.__file__)) + os.sep


def kfuse_frames(exc: BaseException) -> list[str]:
    """The kfuse frames in everything Python prints for ``exc``: its traceback and the exceptions chained to it."""
    text = "".join(traceback.format_exception(exc))
    return [line for line in text.splitlines() if line.strip().startswith(f'File "{KFUSE_DIR}')]


def frames_of_this_file(exc: BaseException) -> list[str]:
    return [entry.name for entry in traceback.extract_tb(exc.__traceback__) if entry.filename == __file__]


@pytest.fixture(autouse=True)
def internal_frames_hidden(monkeypatch):
    monkeypatch.delenv("KFUSE_DEBUG", raising=False)


@pytest.fixture
def eager():
    yield
    pk.disable_fusion()


@pk.workunit
def uses_with(i, x):
    with open("log.txt") as log:
        x[i] = len(log.read())


@pytest.mark.parametrize("fusion", [False, True])
def test_unsupported_construct_shows_the_users_call_and_at_most_two_kfuse_frames(fusion, eager):
    if fusion:
        pk.enable_fusion()
    with pytest.raises(pk.UnsupportedSyntaxError) as info:
        pk.parallel_for(4, uses_with, x=pk.View([4]))
    assert len(kfuse_frames(info.value)) <= 2, kfuse_frames(info.value)
    assert frames_of_this_file(info.value) == [
        "test_unsupported_construct_shows_the_users_call_and_at_most_two_kfuse_frames"]
    printed = "".join(traceback.format_exception(info.value))
    assert f"{__file__}:{uses_with.fn.__code__.co_firstlineno + 2}:5: in workunit 'uses_with'" in printed
    assert "with statement" in printed and "        ^" in printed


def test_kfuse_debug_shows_the_internal_frames(monkeypatch):
    monkeypatch.setenv("KFUSE_DEBUG", "1")
    with pytest.raises(pk.UnsupportedSyntaxError) as info:
        pk.parallel_for(4, uses_with, x=np.zeros(4))
    frames = kfuse_frames(info.value)
    assert len(frames) > 2
    assert any("normalize.py" in f for f in frames)  # where the construct was found


# --- nesting deeper than kfuse's recursive passes can take -----------------------------------------------
def load_module(path, text: str):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chain(n: int) -> str:
    return " + ".join(["1.0"] * n)


def test_deep_nesting_is_an_unsupported_syntax_error_not_a_recursion_error(tmp_path, eager):
    module = load_module(tmp_path / "deep_kernels.py", (
        "import kfuse as pk\n"
        "@pk.workunit\n"
        "def long_chain(i, x):\n"
        f"    x[i] = {chain(1500)}\n"
        "@pk.function\n"
        "def deep_helper(v: float) -> float:\n"
        f"    return v + {chain(300)}\n"
        "@pk.workunit\n"
        "def calls_deep_helper(i, x):\n"
        "    x[i] = deep_helper(1.0)\n"
        "@pk.workunit\n"
        "def just_fits(i, x):\n"
        f"    x[i] = {chain(workunit_module.MAX_NESTING - 10)}\n"))
    x = pk.View([3])
    for wu, where in [(module.long_chain, "4:5: in workunit 'long_chain'"),
                      (module.calls_deep_helper, "7:5: in workunit 'deep_helper'")]:
        for fusion in (False, True):
            if fusion:
                pk.enable_fusion()
            with pytest.raises(pk.UnsupportedSyntaxError, match="nested more than 100 levels deep") as info:
                pk.parallel_for(3, wu, x=x)
            assert f"deep_kernels.py:{where}" in str(info.value)
            assert "split it into several statements" in str(info.value)
            assert len(kfuse_frames(info.value)) <= 2
            pk.disable_fusion()
    pk.parallel_for(3, module.just_fits, x=x)
    np.testing.assert_array_equal(np.asarray(x), float(workunit_module.MAX_NESTING - 10))


# --- kfuse's own bugs ---------------------------------------------------------------------------------------
@pk.workunit
def fill(i, x, v):
    x[i] = v


def test_a_bug_inside_kfuse_is_an_internal_error_chained_to_it(monkeypatch):
    monkeypatch.setattr(kokkos, "generate", None)  # kfuse's own code now fails where it calls it
    with pytest.raises(pk.InternalError) as info:
        pk.parallel_for(2, fill, x=np.zeros(2), v=7)
    error = info.value
    assert isinstance(error, pk.KfuseError)
    assert "bug in kfuse" in str(error) and "TypeError: 'NoneType' object is not callable" in str(error)
    assert isinstance(error.__cause__, TypeError)
    cause_frames = [entry.filename for entry in traceback.extract_tb(error.__cause__.__traceback__)]
    assert cause_frames[-1].endswith(os.path.join("backends", "kokkos.py"))  # the bug's frame is kept
    assert frames_of_this_file(error) == ["test_a_bug_inside_kfuse_is_an_internal_error_chained_to_it"]


# --- exceptions that are not kfuse's pass unchanged ------------------------------------------------------------
@pk.workunit
def positive_sum(i, acc, x):
    acc += x[i]


@pk.workunit
def square_root_of_i_minus_one(i, x):
    x[i] = math.sqrt(i - 1.0)


def interrupt(*args):
    raise KeyboardInterrupt


def test_users_exceptions_pass_unchanged(eager, monkeypatch):
    pk.enable_fusion()
    total = pk.parallel_reduce(3, positive_sum, x=pk.View([3]))
    with pytest.raises(ZeroDivisionError) as info:
        total / 0  # the user's arithmetic on a Future (of 0.0)
    assert type(info.value) is ZeroDivisionError
    pk.disable_fusion()

    debug = pk.RangePolicy(pk.Debug, 0, 3)  # runs the workunit as Python
    with pytest.raises(ValueError, match="math domain error") as info:  # Python's math.sqrt(-1.0)
        pk.parallel_for(debug, square_root_of_i_minus_one, x=np.zeros(3))
    assert type(info.value) is ValueError
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "square_root_of_i_minus_one"
    with pytest.raises(TypeError, match="expected a thread count or a policy") as info:
        pk.parallel_for(None, fill, x=np.zeros(3), v=1.0)  # raised on purpose by kfuse, as a TypeError
    assert not isinstance(info.value, pk.InternalError)
    monkeypatch.setattr(dispatch, "bind", interrupt)
    with pytest.raises(KeyboardInterrupt):
        pk.parallel_for(3, fill, x=np.zeros(3), v=1.0)


# --- errors of delayed calls, where the host reads their results --------------------------------------------
@pk.workunit
def team_fill(team: pk.TeamMember, x):
    x[team.league_rank()] = 1.0


@pk.workunit
def team_count(team: pk.TeamMember, acc):
    acc += 1


def test_errors_of_delayed_calls_show_at_most_two_kfuse_frames(eager):
    too_big = pk.TeamPolicy(2, 100000)  # fails in C++ when launched
    pk.enable_fusion()
    x = pk.View([2])
    pk.parallel_for(too_big, team_fill, x=x)
    with pytest.raises(pk.KfuseError, match="team_size 100000 is larger than") as info:
        np.asarray(x)
    assert len(kfuse_frames(info.value)) <= 2, kfuse_frames(info.value)

    count = pk.parallel_reduce(too_big, team_count)
    with pytest.raises(pk.KfuseError, match="team_size 100000 is larger than") as info:
        float(count)
    assert len(kfuse_frames(info.value)) <= 2, kfuse_frames(info.value)

    pk.parallel_for(too_big, team_fill, x=pk.View([2]))
    with pytest.raises(pk.KfuseError, match="team_size 100000 is larger than") as info:
        pk.fence()
    assert len(kfuse_frames(info.value)) <= 2, kfuse_frames(info.value)

    pk.disable_fusion()
    with pytest.raises(pk.KfuseError, match="team_size 100000 is larger than") as info:
        with pk.fusion():  # the flush at the end of the block fails
            pk.parallel_for(too_big, team_fill, x=pk.View([2]))
    assert len(kfuse_frames(info.value)) <= 2, kfuse_frames(info.value)
