"""GaussianNB's prediction as array code (examples/gaussian_nb_array.py) on samples held in a View, eager and fused
side by side in one process (alternating repeats), with the peers bench's NumPy array code on the same data: milliseconds
per prediction (medians), the fused/eager ratio, and the load average.

    KFUSE_NUM_THREADS=2 .venv/bin/python benchmarks/bench_gaussian_nb_predict.py [--size medium] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kfuse as pk  # noqa: E402
from examples.gaussian_nb import SIZES, make_data  # noqa: E402
from examples.gaussian_nb_array import GaussianNB, numpy_fit_predict  # noqa: E402
from kfuse.bench.peers import gaussian_nb_xp, median_ms  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="medium")
    parser.add_argument("--repeats", type=int, default=5, help="alternations of eager and fused")
    parser.add_argument("--runs", type=int, default=15, help="timed predictions per repeat")
    args = parser.parse_args()
    n_train, n_test, features, classes = SIZES[args.size]
    X, y = make_data(n_train + n_test, features, classes)
    model = GaussianNB().fit(X[:n_train], y[:n_train])
    test = pk.array(np.array(X[n_train:]))
    want = numpy_fit_predict(X[:n_train], y[:n_train], X[n_train:])["predicted"]
    samples = np.array(X[n_train:])
    fitted = (np.asarray(model.theta_).copy(), np.asarray(model.var_).copy(), np.log(np.asarray(model.class_prior_)))

    def predict():
        np.asarray(model.predict_index(test))  # the labels' indices read back

    numbers = {"eager": [], "fused": [], "numpy": []}
    for _ in range(args.repeats):
        numbers["eager"].append(median_ms(predict, args.runs))
        with pk.fusion():
            for _ in range(10):  # until the profitability trials are decided
                predict()
            numbers["fused"].append(median_ms(predict, args.runs))
            assert (model.classes_[np.asarray(model.predict_index(test))] == want).all()
        numbers["numpy"].append(median_ms(lambda: gaussian_nb_xp(np, samples, *fitted), args.runs))
    eager, fused = statistics.median(numbers["eager"]), statistics.median(numbers["fused"])
    print(f"GaussianNB predict ({args.size}: {n_test} samples x {features} features, {classes} classes), "
          f"KFUSE_NUM_THREADS={os.environ.get('KFUSE_NUM_THREADS', '-')}, load {os.getloadavg()[0]:.2f}")
    print(f"eager {eager:.2f} ms, fused {fused:.2f} ms (fused/eager {fused / eager:.2f}); "
          f"NumPy {statistics.median(numbers['numpy']):.2f} ms (kfuse.bench.peers.gaussian_nb_xp)")


if __name__ == "__main__":
    main()
