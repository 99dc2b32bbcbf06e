"""ExaMiniMD-style Lennard-Jones molecular dynamics written with kfuse kernels.

``run_simulation(input_path, cells, steps, fusion)`` runs the LJ melt of ``in.lj`` and returns its thermo
rows; ``main.py`` is the command line.
"""
from .input import DEFAULT_INPUT, Input, InputError, parse, read
from .simulation import PHASES, Simulation, Thermo, run_simulation

__all__ = ["DEFAULT_INPUT", "Input", "InputError", "PHASES", "Simulation", "Thermo", "parse", "read",
           "run_simulation"]
