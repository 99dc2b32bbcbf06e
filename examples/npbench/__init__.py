"""NPBench/PolyBench subjects written as sequences of kfuse kernels, one kernel per array statement.

Each module has ``initialize(size)`` (deterministic NumPy inputs), ``run_kfuse(**inputs)`` (the outputs as
NumPy arrays) and a command line: ``python examples/npbench/<name>.py --size small|medium|large [--fusion]``.
"""
SUBJECTS = ("adi", "covariance", "fdtd_2d", "jacobi_1d", "mvt", "syrk", "syr2k")
