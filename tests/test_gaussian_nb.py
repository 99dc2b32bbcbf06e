"""Gaussian Naive Bayes on kfuse (examples/gaussian_nb.py) against scikit-learn's GaussianNB."""
import contextlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB as SkGaussianNB

import kfuse as pk
from fusion_check import captured_predictions

_spec = importlib.util.spec_from_file_location(
    "kfuse_example_gaussian_nb", Path(__file__).resolve().parent.parent / "examples" / "gaussian_nb.py")
gnb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gnb)

# Eager runs check the program against NumPy on the reference interpreter (no compiler); fused runs compile
# every kernel, fused or left alone, so the C++ of these programs is still built and checked end to end.
MODES = pytest.mark.parametrize("fusion", [pytest.param(False, id="eager", marks=pytest.mark.backend("python")),
                                       pytest.param(True, id="fusion")])


def unequal_classes(seed=3):
    """Four classes of very different sizes, labels that are not 0..k-1, features on different scales."""
    rng = np.random.default_rng(seed)
    sizes = {7: 400, -2: 35, 40: 150, 3: 9}
    X = np.concatenate([rng.normal(rng.normal(0, 2, 6), rng.uniform(0.1, 3.0, 6), size=(n, 6))
                        for n in sizes.values()])
    X[:, 2] *= 1e3
    y = np.concatenate([np.full(n, label) for label, n in sizes.items()])
    order = rng.permutation(len(y))
    return X[order], y[order]


def check_against_sklearn(model, jll, predicted, X_train, y_train, X_test):
    ref = SkGaussianNB().fit(X_train, y_train)
    np.testing.assert_array_equal(model.classes_, ref.classes_)
    np.testing.assert_allclose(np.asarray(model.theta_), ref.theta_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(model.var_), ref.var_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(model.class_prior_), ref.class_prior_, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(model.class_count_), ref.class_count_)
    assert float(model.epsilon_) == pytest.approx(ref.epsilon_, rel=1e-12)
    np.testing.assert_allclose(np.asarray(jll), ref.predict_joint_log_proba(X_test), rtol=1e-12)
    np.testing.assert_array_equal(predicted, ref.predict(X_test))


@pytest.fixture(params=[False, True], ids=["threads", "pairs"])
def pairs(request, monkeypatch):
    """Whether the prediction runs as on a GPU (gnb.jll_pairs: a 1-D range over samples and classes), here on the
    host."""
    if request.param:
        monkeypatch.setattr(gnb, "PAIR_SPACES", gnb.PAIR_SPACES | {pk.get_default_space().value})
    return request.param


@MODES
def test_fit_and_predict_match_sklearn(fusion, pairs):
    X, y = unequal_classes()
    X_train, y_train, X_test = X[:450], y[:450], X[450:]
    before = pk.stats()["ops_traced"]
    with pk.fusion() if fusion else contextlib.nullcontext():
        model = gnb.GaussianNB().fit(X_train, y_train)
        jll = model.predict_joint_log_likelihood(X_test)
        index = model.predict_index(X_test)
        if fusion:
            assert isinstance(model.epsilon_, pk.Future)
            assert pk.stats()["ops_traced"] - before >= 10  # every step was traced, nothing has run yet
    check_against_sklearn(model, jll, model.classes_[np.asarray(index)], X_train, y_train, X_test)
    np.testing.assert_array_equal(model.predict(X_test), model.classes_[np.asarray(index)])


@MODES
def test_run_matches_sklearn(fusion):
    """run() is what the benchmark times: its model arrays and predictions must be sklearn's."""
    res = gnb.run("small", n_train=600, n_test=300, features=5, classes=3, fusion=fusion)
    ref = SkGaussianNB().fit(res["X_train"], res["y_train"])
    np.testing.assert_allclose(res["theta"], ref.theta_, rtol=1e-12)
    np.testing.assert_allclose(res["var"], ref.var_, rtol=1e-12)
    np.testing.assert_allclose(res["class_prior"], ref.class_prior_, rtol=1e-15)
    assert res["epsilon"] == pytest.approx(ref.epsilon_, rel=1e-12)
    np.testing.assert_allclose(res["jll"], ref.predict_joint_log_proba(res["X_test"]), rtol=1e-12)
    np.testing.assert_array_equal(res["predicted"], ref.predict(res["X_test"]))
    assert np.mean(res["predicted"] == res["y_test"]) > 0.8  # the synthetic classes are separable


def test_var_smoothing_dominates_tiny_variances():
    """A constant feature has zero variance; the smoothing epsilon must keep its likelihood finite, as sklearn's."""
    X, y = unequal_classes(seed=5)
    X[:, 4] = 1.25
    model = gnb.GaussianNB(var_smoothing=1e-6).fit(X, y)
    ref = SkGaussianNB(var_smoothing=1e-6).fit(X, y)
    np.testing.assert_allclose(np.asarray(model.var_), ref.var_, rtol=1e-12)
    jll = np.asarray(model.predict_joint_log_likelihood(X))
    assert np.isfinite(jll).all()
    np.testing.assert_allclose(jll, ref.predict_joint_log_proba(X), rtol=1e-12)



def test_script_runs_from_the_command_line(capsys):
    gnb.main(["--size", "small", "--repeat", "1", "--fusion"])
    out = capsys.readouterr().out
    assert out.startswith("run 0: ") and "fusion=True" in out
    assert float(out.split("test accuracy=")[1].split()[0]) > 0.8


def test_a_captured_prediction_replays_into_new_memory_and_equals_sklearn(pairs):
    """``pk.capture(most_likely)`` over the fitted Views: later predictions replay the first one's kernels (each into
    new memory), and every prediction -- new samples written into the same View between calls, earlier results kept
    -- is scikit-learn's."""
    X, y = unequal_classes()
    X_train, y_train, X_test = X[:450], y[:450], X[450:]
    ref = SkGaussianNB().fit(X_train, y_train)
    model, samples, kept, replays, predict = captured_predictions(gnb, X_train, y_train, X_test, seed=8)
    for batch, index in zip(samples, kept):
        np.testing.assert_array_equal(model.classes_[index], ref.predict(batch))
    assert predict.why_not is None and replays > 0
