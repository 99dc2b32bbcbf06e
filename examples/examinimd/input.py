"""Reader for the LAMMPS-style input of the LJ melt problem (the commands ExaMiniMD's ``in.lj`` uses).

Only what this problem needs is accepted; anything else is an error naming the line, so a typo or an
unsupported option never silently changes the physics.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

DEFAULT_INPUT = Path(__file__).resolve().parent / "in.lj"


class InputError(ValueError):
    """A command the reader does not understand, or understands but does not support."""


@dataclass(frozen=True)
class PairCoeff:
    epsilon: float
    sigma: float
    cutoff: float


@dataclass(frozen=True)
class Input:
    """Everything the simulation takes from the input file (LJ reduced units throughout)."""

    density: float                     # lattice fcc <reduced density>
    region: tuple                      # block xlo xhi ylo yhi zlo zhi, in lattice units
    masses: dict                       # type -> mass
    coeff: PairCoeff
    atom_type: int = 1
    temperature: float | None = None   # velocity create <T>; None: atoms start at rest
    shift: bool = False                # pair_modify shift yes: pair energy is zero at the cutoff
    seed: int = 0
    skin: float = 0.3                  # LAMMPS defaults (lj units) for what the input leaves out
    neigh_every: int = 1
    dt: float = 0.005
    thermo_every: int = 0              # 0: thermo at the first and last step only
    steps: int = 0

    @property
    def cells(self) -> tuple:
        lo_hi = self.region
        return tuple(lo_hi[2 * d + 1] - lo_hi[2 * d] for d in range(3))

    def with_overrides(self, cells: int | tuple | None = None, steps: int | None = None) -> "Input":
        """Command-line overrides: ``--cells N`` makes the box ``block 0 N 0 N 0 N`` (``(NX, NY, NZ)``: ``block 0
        NX 0 NY 0 NZ``, as weak scaling over a process grid needs); ``--steps S`` the run."""
        changes = {}
        if cells is not None:
            sides = (cells,) * 3 if isinstance(cells, int) else tuple(cells)
            if len(sides) != 3 or any(not isinstance(c, int) or c < 1 for c in sides):
                raise InputError(f"--cells must be one or three integers of at least 1, got {cells}")
            changes["region"] = tuple(b for c in sides for b in (0, c))
        if steps is not None:
            if steps < 0:
                raise InputError(f"--steps must be non-negative, got {steps}")
            changes["steps"] = steps
        return dataclasses.replace(self, **changes)


def _number(text: str, kind, line: int, what: str):
    try:
        return kind(text)
    except ValueError:
        raise InputError(f"line {line}: {what} must be a{'n integer' if kind is int else ' number'}, "
                         f"got '{text}'") from None


def _expect(args: list, n: int, line: int, cmd: str, usage: str) -> None:
    if len(args) != n:
        raise InputError(f"line {line}: '{cmd}' takes {usage}")


def _keywords(args: list, line: int, cmd: str, allowed: dict) -> dict:
    """Parse ``key value`` pairs, checking each against the values this reader supports."""
    if len(args) % 2:
        raise InputError(f"line {line}: '{cmd}' keywords come in 'key value' pairs")
    found = {}
    for key, value in zip(args[::2], args[1::2]):
        if key not in allowed:
            raise InputError(f"line {line}: '{cmd}' keyword '{key}' is not supported")
        check = allowed[key]
        if check is int:
            found[key] = _number(value, int, line, f"'{cmd} {key}'")
        elif value not in check:
            raise InputError(f"line {line}: '{cmd} {key} {value}' is not supported (only {'/'.join(check)})")
        else:
            found[key] = value
    return found


def parse(text: str) -> Input:
    """Read the input text into an :class:`Input`."""
    values = {}
    masses = {}
    have_box = False
    pair_cutoff = None
    for line_no, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        cmd, args = words[0], words[1:]
        if cmd == "units":
            if args != ["lj"]:
                raise InputError(f"line {line_no}: only 'units lj' is supported")
        elif cmd == "atom_style":
            if args != ["atomic"]:
                raise InputError(f"line {line_no}: only 'atom_style atomic' is supported")
        elif cmd == "lattice":
            _expect(args, 2, line_no, cmd, "'fcc <density>'")
            if args[0] != "fcc":
                raise InputError(f"line {line_no}: only fcc lattices are supported")
            values["density"] = _number(args[1], float, line_no, "the lattice density")
            if values["density"] <= 0:
                raise InputError(f"line {line_no}: the lattice density must be positive")
        elif cmd == "region":
            if len(args) != 8 or args[1] != "block":
                raise InputError(f"line {line_no}: 'region' takes '<id> block xlo xhi ylo yhi zlo zhi'")
            region = tuple(_number(a, int, line_no, "a block bound (whole lattice cells)") for a in args[2:])
            if any(region[2 * d + 1] <= region[2 * d] for d in range(3)):
                raise InputError(f"line {line_no}: each block upper bound must exceed its lower bound")
            values["region"] = region
        elif cmd == "create_box":
            _expect(args, 2, line_no, cmd, "'<ntypes> <region>'")
            if _number(args[0], int, line_no, "the number of atom types") != 1:
                raise InputError(f"line {line_no}: only one atom type is supported")
            have_box = True
        elif cmd == "create_atoms":
            _expect(args, 2, line_no, cmd, "'<type> box'")
            if not have_box or args[1] != "box":
                raise InputError(f"line {line_no}: 'create_atoms <type> box' needs a create_box before it")
            values["atom_type"] = _number(args[0], int, line_no, "the atom type")
            if values["atom_type"] != 1:
                raise InputError(f"line {line_no}: the box has one atom type, so atoms must be of type 1")
        elif cmd == "mass":
            _expect(args, 2, line_no, cmd, "'<type> <mass>'")
            atom_type = _number(args[0], int, line_no, "the atom type")
            mass = _number(args[1], float, line_no, "the mass")
            if mass <= 0:
                raise InputError(f"line {line_no}: the mass must be positive")
            masses[atom_type] = mass
        elif cmd == "velocity":
            if len(args) < 4 or args[0] != "all" or args[1] != "create":
                raise InputError(f"line {line_no}: 'velocity' takes 'all create <T> <seed> [keyword value ...]'")
            values["temperature"] = _number(args[2], float, line_no, "the temperature")
            values["seed"] = _number(args[3], int, line_no, "the seed")
            if values["seed"] <= 0:
                raise InputError(f"line {line_no}: the velocity seed must be positive")
            _keywords(args[4:], line_no, cmd, {"loop": ("geom",), "dist": ("uniform",), "mom": ("yes",),
                                               "rot": ("no",)})
        elif cmd == "pair_style":
            _expect(args, 2, line_no, cmd, "'lj/cut <cutoff>'")
            if args[0] != "lj/cut":
                raise InputError(f"line {line_no}: only 'pair_style lj/cut' is supported")
            pair_cutoff = _number(args[1], float, line_no, "the cutoff")
        elif cmd == "pair_coeff":
            if len(args) not in (4, 5) or args[:2] != ["1", "1"]:
                raise InputError(f"line {line_no}: 'pair_coeff' takes '1 1 <epsilon> <sigma> [cutoff]'")
            eps, sigma = (_number(a, float, line_no, "epsilon/sigma") for a in args[2:4])
            cut = _number(args[4], float, line_no, "the cutoff") if len(args) == 5 else None
            if pair_cutoff is None:
                raise InputError(f"line {line_no}: 'pair_coeff' needs a 'pair_style' before it")
            values["coeff"] = PairCoeff(eps, sigma, pair_cutoff if cut is None else cut)
            if min(values["coeff"].sigma, values["coeff"].cutoff) <= 0:
                raise InputError(f"line {line_no}: sigma and the cutoff must be positive")
        elif cmd == "pair_modify":
            kw = _keywords(args, line_no, cmd, {"shift": ("yes", "no")})
            values["shift"] = kw.get("shift", "no") == "yes"
        elif cmd == "neighbor":
            _expect(args, 2, line_no, cmd, "'<skin> bin'")
            if args[1] != "bin":
                raise InputError(f"line {line_no}: only 'neighbor <skin> bin' is supported")
            values["skin"] = _number(args[0], float, line_no, "the skin")
            if values["skin"] < 0:
                raise InputError(f"line {line_no}: the skin must not be negative")
        elif cmd == "neigh_modify":
            kw = _keywords(args, line_no, cmd, {"delay": ("0",), "every": int, "check": ("no",)})
            if "every" in kw:
                if kw["every"] < 1:
                    raise InputError(f"line {line_no}: 'neigh_modify every' must be at least 1")
                values["neigh_every"] = kw["every"]
        elif cmd == "newton":
            # ExaMiniMD's in.lj says 'newton off'. It only picks whether forces on ghost atoms are sent
            # back to their owners; this example has no ghost atoms (minimum image), so it changes nothing.
            if args not in (["on"], ["off"]):
                raise InputError(f"line {line_no}: 'newton' takes 'on' or 'off'")
        elif cmd == "fix":
            if args[1:] != ["all", "nve"]:
                raise InputError(f"line {line_no}: only 'fix <id> all nve' is supported")
        elif cmd == "timestep":
            _expect(args, 1, line_no, cmd, "'<dt>'")
            values["dt"] = _number(args[0], float, line_no, "the timestep")
            if values["dt"] <= 0:
                raise InputError(f"line {line_no}: the timestep must be positive")
        elif cmd == "thermo":
            _expect(args, 1, line_no, cmd, "'<every>'")
            values["thermo_every"] = _number(args[0], int, line_no, "the thermo interval")
            if values["thermo_every"] < 0:
                raise InputError(f"line {line_no}: the thermo interval must not be negative")
        elif cmd == "run":
            _expect(args, 1, line_no, cmd, "'<steps>'")
            values["steps"] = _number(args[0], int, line_no, "the number of steps")
            if values["steps"] < 0:
                raise InputError(f"line {line_no}: the number of steps must not be negative")
        else:
            raise InputError(f"line {line_no}: unknown or unsupported command '{cmd}'")
    return _finish(values, masses)


def _finish(values: dict, masses: dict) -> Input:
    for key, command in (("density", "lattice"), ("region", "region"), ("coeff", "pair_coeff")):
        if key not in values:
            raise InputError(f"the input has no '{command}' command")
    if "atom_type" not in values:
        raise InputError("the input creates no atoms ('create_atoms <type> box')")
    if values["atom_type"] not in masses:
        raise InputError(f"the input sets no mass for atom type {values['atom_type']}")
    values["masses"] = masses
    return Input(**values)


def read(path=None) -> Input:
    """Parse the input file at ``path`` (default: the ``in.lj`` beside this module)."""
    return parse(Path(path or DEFAULT_INPUT).read_text())
