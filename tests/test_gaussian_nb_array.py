"""Gaussian Naive Bayes as array code (examples/gaussian_nb_array.py), eager and fused, against scikit-learn's
computation in NumPy and against the hand-written kernels of examples/gaussian_nb.py."""
import contextlib
import sys
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk
from fusion_check import captured_predictions

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the examples are imported as a package from the repository root
    sys.path.insert(0, str(ROOT))

from examples import gaussian_nb, gaussian_nb_array  # noqa: E402

MODES = pytest.mark.parametrize("fusion", [pytest.param(False, id="eager", marks=pytest.mark.backend("python")),
                                        pytest.param(True, id="fusion")])


def data():
    """Three classes of unequal sizes, labels that are strings, features on different scales."""
    X, y = gaussian_nb.make_data(500, 5, 3, seed=4)
    X[:, 1] *= 1e3
    return X[:350], y[:350], X[350:]


@MODES
def test_array_code_equals_numpy_and_hand_kernels(fusion):
    X_train, y_train, X_test = data()
    want = gaussian_nb_array.numpy_fit_predict(X_train, y_train, X_test)
    with pk.fusion() if fusion else contextlib.nullcontext():
        model = gaussian_nb_array.GaussianNB().fit(X_train, y_train)
        jll = model.predict_joint_log_likelihood(X_test)
        index = model.predict_index(X_test)
        test = pk.array(X_test.copy())  # a View: used as it is
        from_view = np.asarray(model.predict_joint_log_likelihood(test)).copy()
        index_from_view = model.predict_index(test)
        hand = gaussian_nb.GaussianNB().fit(X_train, y_train)
        hand_jll = hand.predict_joint_log_likelihood(X_test)
    np.testing.assert_array_equal(model.classes_, want["classes"])
    for name in ("theta", "var", "class_count", "class_prior"):
        np.testing.assert_allclose(np.asarray(getattr(model, name + "_")), want[name], rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(np.asarray(getattr(hand, name + "_")), want[name], rtol=1e-12, err_msg=name)
    assert float(model.epsilon_) == pytest.approx(want["epsilon"], rel=1e-12)
    np.testing.assert_allclose(np.asarray(jll), want["jll"], rtol=1e-12)
    np.testing.assert_array_equal(from_view, np.asarray(jll))
    np.testing.assert_array_equal(np.asarray(index_from_view), np.asarray(index))
    np.testing.assert_allclose(np.asarray(hand_jll), want["jll"], rtol=1e-12)
    np.testing.assert_array_equal(model.classes_[np.asarray(index)], want["predicted"])


@pytest.mark.backend("python")
def test_numpy_reference_is_scikit_learns():
    sklearn = pytest.importorskip("sklearn.naive_bayes")
    X_train, y_train, X_test = data()
    want = gaussian_nb_array.numpy_fit_predict(X_train, y_train, X_test)
    ref = sklearn.GaussianNB().fit(X_train, y_train)
    np.testing.assert_allclose(want["theta"], ref.theta_, rtol=1e-14)
    np.testing.assert_allclose(want["var"], ref.var_, rtol=1e-14)
    np.testing.assert_allclose(want["jll"], ref.predict_joint_log_proba(X_test), rtol=1e-12)
    np.testing.assert_array_equal(want["predicted"], ref.predict(X_test))


@pytest.mark.backend("python")
def test_predict_returns_labels():
    X_train, y_train, X_test = data()
    model = gaussian_nb_array.GaussianNB().fit(X_train, y_train)
    np.testing.assert_array_equal(model.predict(X_test),
                                  gaussian_nb_array.numpy_fit_predict(X_train, y_train, X_test)["predicted"])



def test_a_captured_prediction_replays_into_new_memory_and_equals_numpy():
    """``pk.capture(most_likely)`` over the fitted Views: later predictions replay the first one's kernels (each into
    new memory), and every prediction -- new samples written into the same View between calls, earlier results kept
    -- is NumPy's."""
    X_train, y_train, X_test = data()
    model, samples, kept, replays, predict = captured_predictions(gaussian_nb_array, X_train, y_train, X_test, seed=5)
    for batch, index in zip(samples, kept):
        want = gaussian_nb_array.numpy_fit_predict(X_train, y_train, batch)["predicted"]
        np.testing.assert_array_equal(model.classes_[index], want)
    assert predict.why_not is None and replays > 0
