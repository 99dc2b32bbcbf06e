"""Gaussian Naive Bayes as array code: scikit-learn's GaussianNB computation, statement by statement, in NumPy
(``numpy_fit_predict``) and in kfuse array operations (``GaussianNB``), next to examples/gaussian_nb.py's
hand-written kernels.

fit: per class, the samples of that class (gathered on the host: their indices come from the labels), then
their mean and variance along axis 0 into that class's row of theta and var; epsilon = var_smoothing times
the largest feature variance, added to every variance; priors are the class frequencies. predict: per class,
log prior - 1/2 sum log(2 pi var) - 1/2 sum (X - theta)^2 / var along axis 1, the class row broadcast over
the samples; the label is the argmax over classes.

    python examples/gaussian_nb_array.py --size small|medium|large [--fusion]
"""
from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.gaussian_nb import SIZES, make_data  # noqa: E402


def numpy_fit_predict(X_train, y_train, X_test, var_smoothing: float = 1e-9) -> dict:
    """scikit-learn's GaussianNB fit (no sample weights, no given priors) and joint log likelihood, in NumPy."""
    epsilon = var_smoothing * np.var(X_train, axis=0).max()
    classes = np.unique(y_train)
    theta = np.zeros((len(classes), X_train.shape[1]))
    var = np.zeros((len(classes), X_train.shape[1]))
    class_count = np.zeros(len(classes))
    for i, y_i in enumerate(classes):
        X_i = X_train[y_train == y_i, :]
        theta[i, :] = np.mean(X_i, axis=0)
        var[i, :] = np.var(X_i, axis=0)
        class_count[i] += X_i.shape[0]
    var[:, :] += epsilon
    class_prior = class_count / class_count.sum()
    jll = []
    for i in range(len(classes)):
        jointi = np.log(class_prior[i])
        n_ij = -0.5 * np.sum(np.log(2.0 * np.pi * var[i, :]))
        n_ij -= 0.5 * np.sum(((X_test - theta[i, :]) ** 2) / (var[i, :]), 1)
        jll.append(jointi + n_ij)
    jll = np.array(jll).T
    return {"classes": classes, "theta": theta, "var": var, "class_count": class_count, "class_prior": class_prior,
            "epsilon": epsilon, "jll": jll, "predicted": classes[np.argmax(jll, axis=1)]}


class GaussianNB:
    """fit / predict as ``sklearn.naive_bayes.GaussianNB``, one kfuse statement per NumPy line of
    :func:`numpy_fit_predict` (attributes are Views; ``epsilon_`` a number, or a Future while fusing)."""

    def __init__(self, var_smoothing: float = 1e-9):
        self.var_smoothing = var_smoothing

    def fit(self, X, y) -> "GaussianNB":
        X, y = pk.array(np.asarray(X, dtype=np.float64)), np.asarray(y)
        # var_smoothing * max(var) as max(var_smoothing * var): equal (rounding is monotonic), and no number
        # has to come back to the host first
        self.epsilon_ = pk.max(pk.multiply(pk.var(X, axis=0), self.var_smoothing))
        self.classes_ = np.unique(y)
        k, f = len(self.classes_), X.shape[1]
        self.theta_, self.var_, self.class_count_ = pk.zeros((k, f)), pk.zeros((k, f)), pk.zeros(k)
        for i, y_i in enumerate(self.classes_):
            X_i = pk.index(X, np.flatnonzero(y == y_i))
            pk.mean(X_i, axis=0, out=self.theta_[i, :])
            pk.var(X_i, axis=0, out=self.var_[i, :])
            pk.add(self.class_count_[i:i + 1], X_i.shape[0], out=self.class_count_[i:i + 1])
        pk.add(self.var_, self.epsilon_, out=self.var_)
        self.class_prior_ = pk.divide(self.class_count_, pk.sum(self.class_count_))
        return self

    def predict_joint_log_likelihood(self, X):
        """jll[i][c]: the unnormalised log posterior of class c for sample i (a View). ``X``: an array (converted
        to a View each call) or a View, used as it is (on a GPU its data stay there between calls)."""
        if not isinstance(X, pk.View):
            X = pk.array(np.ascontiguousarray(X, dtype=np.float64))
        return joint_log_likelihood(X, self.theta_, self.var_, self.class_prior_)

    def predict_index(self, X):
        """Index into ``classes_`` of the most likely class of every sample (a View)."""
        return pk.argmax(self.predict_joint_log_likelihood(X), axis=1)

    def predict(self, X) -> np.ndarray:
        return self.classes_[np.asarray(self.predict_index(X))]


def joint_log_likelihood(X, theta, var, class_prior):
    """The prediction's joint log likelihood from the fitted Views alone (a function of Views, which ``pk.capture``
    can replay: ``most_likely``)."""
    jll = pk.empty((X.shape[0], theta.shape[0]))
    for i in range(theta.shape[0]):  # 1-element slices broadcast over the samples, as the numbers would
        jointi = pk.log(class_prior[i:i + 1])
        n_ij = pk.multiply(pk.sum(pk.log(pk.multiply(var[i:i + 1, :], 2.0 * math.pi)), axis=1), -0.5)
        n_ij = pk.subtract(n_ij, pk.multiply(pk.sum(pk.divide(pk.square(pk.subtract(X, theta[i:i + 1, :])),
                                                              var[i:i + 1, :]), axis=1), 0.5))
        pk.add(jointi, n_ij, out=jll[:, i])
    return jll


def most_likely(X, theta, var, class_prior):
    """Index of the most likely class of every sample of ``X`` (a View): ``pk.capture(most_likely)`` replays a
    prediction's kernels, each call into new memory, without its Python."""
    return pk.argmax(joint_log_likelihood(X, theta, var, class_prior), axis=1)


def run(size: str = "small", *, fusion: bool = False) -> dict:
    """Fit and predict on examples/gaussian_nb.py's data of ``size``; the model's arrays and seconds taken."""
    n_train, n_test, features, classes = SIZES[size]
    X, y = make_data(n_train + n_test, features, classes)
    start = time.perf_counter()
    with pk.fusion() if fusion else contextlib.nullcontext():
        model = GaussianNB().fit(X[:n_train], y[:n_train])
        jll = model.predict_joint_log_likelihood(X[n_train:])
        index = pk.argmax(jll, axis=1)
    predicted = model.classes_[index.copy()]
    seconds = time.perf_counter() - start
    return {"predicted": predicted, "y_test": y[n_train:], "jll": jll.copy(), "seconds": seconds}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--fusion", action="store_true", help="trace and fuse the array operations")
    parser.add_argument("--repeat", type=int, default=3, help="runs (the first includes compiling)")
    args = parser.parse_args(argv)
    for r in range(args.repeat):
        res = run(args.size, fusion=args.fusion)
        print(f"run {r}: {res['seconds']:.4f} s (fit + predict)")
    print(f"test accuracy={np.mean(res['predicted'] == res['y_test']):.4f} fusion={args.fusion}")


if __name__ == "__main__":
    main()
