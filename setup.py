"""kfuse: a tracing JIT kernel-fusion runtime for a PyKokkos-style Python kernel DSL."""
from setuptools import find_packages, setup

setup(
    name="kfuse",
    version="0.1.0",
    description="Tracing JIT kernel fusion for PyKokkos-style Python HPC kernels",
    packages=find_packages(include=["kfuse", "kfuse.*"]),
    python_requires=">=3.10",
    install_requires=["numpy>=1.24"],
)
