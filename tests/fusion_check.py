"""Shared helpers of the fuser tests: run a program eagerly and fused, and compare the two exactly."""
import math

import numpy as np

import kfuse as pk
from kfuse import context


def run_eager_and_fused(program):
    """``program()`` eagerly, then with fusion on; returns (eager result, fused result, fused stats, explain).

    ``program`` makes fresh data and returns host copies of what it computed; the stats and the
    explain text cover only the fused run (taken before tracing is switched off).
    """
    expected = program()
    first = list(context.current().records)[-1].number if list(context.current().records) else 0
    pk.reset_stats()
    pk.enable_fusion()
    assert pk.fusion_enabled()
    got = program()
    stats = pk.stats()
    text = "\n".join(r.text() for r in list(context.current().records) if r.number > first)
    pk.disable_fusion()
    return expected, got, stats, text


def assert_same(expected, got):
    """Bit-for-bit equal, with equal types and dtypes, through nested tuples and lists."""
    assert type(expected) is type(got)
    if isinstance(expected, (tuple, list)):
        assert len(expected) == len(got)
        for e, g in zip(expected, got):
            assert_same(e, g)
    elif isinstance(expected, np.ndarray):
        assert expected.dtype == got.dtype
        np.testing.assert_array_equal(got, expected)
    else:
        assert got == expected


def view_of(values, dtype=pk.double) -> pk.View:
    v = pk.View(np.shape(values), dtype)
    v[:] = values
    return v


def gaussian_chain(x, mu, var):
    """The Gaussian log-likelihood sum as nine array operations (eight intermediates, then a reduction)."""
    return pk.sum(pk.subtract(pk.multiply(pk.log(pk.multiply(var, 2 * math.pi)), -0.5),
                              pk.divide(pk.square(pk.subtract(x, mu)), pk.multiply(var, 2.0))))


def gaussian_numpy(x, mu, var) -> float:
    return float(np.sum(-0.5 * np.log(2 * math.pi * var) - (x - mu) ** 2 / (2 * var)))


@pk.workunit
def push(i: int, dt: float, x: pk.View1D[pk.double], v: pk.View1D[pk.double]):
    """Half of a time step (with ``kick``): the pair the replay and long-trace tests loop over."""
    x[i] = x[i] + dt * v[i]


@pk.workunit
def kick(i: int, dt: float, x: pk.View1D[pk.double], v: pk.View1D[pk.double]):
    v[i] = v[i] - dt * x[i]


def captured_predictions(example, X_train, y_train, X_test, seed: int) -> tuple:
    """A GaussianNB example's model fitted with fusion on, then ``pk.capture(example.most_likely)`` called six times
    over one View of samples (``X_test``, then noisy copies written into it between calls), every result kept: (the
    model, the samples of each call, the class index of each, replays counted, the captured function)."""
    predict = pk.capture(example.most_likely)
    rng = np.random.default_rng(seed)
    before = pk.stats()["calls_captured"]
    with pk.fusion():
        model = example.GaussianNB().fit(X_train, y_train)
        test = pk.array(X_test.copy())
        samples, kept = [], []
        for k in range(6):
            batch = X_test + rng.normal(0.0, 0.5, X_test.shape) * (k > 0)
            test[:] = batch
            samples.append(batch)
            kept.append(predict(test, model.theta_, model.var_, model.class_prior_))
        replays = pk.stats()["calls_captured"] - before
    return model, samples, [np.asarray(index) for index in kept], replays, predict
