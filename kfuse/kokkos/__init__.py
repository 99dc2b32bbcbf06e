"""Kokkos installs kfuse compiles against: finding one (``installs``), building one (``build``, from the sources
``sources`` obtains and ``cuda_fixes`` patches), and the first-use decision (``provision``).

``python -m kfuse.kokkos install|status`` is the command line (``__main__``).
"""
