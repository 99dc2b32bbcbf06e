"""``pk.printf`` formats: the conversions of a format, and the ones kernels refuse (C printf would read
or write through arguments kfuse never passes)."""
from __future__ import annotations

import re

# One conversion: flags/width/precision, a length modifier (dropped: kfuse casts), the conversion.
SPEC = re.compile(r"%([-+ #0]*\d*(?:\.\d*)?)(hh|h|ll|l|L|z|j|t)?(.?)")
INTEGER, FLOAT = "diouxXc", "eEfgG"
_REFUSED = {"n": "'%n' writes through a pointer argument", "$": "positional arguments ('%1$d')",
            "*": "a width or precision taken from an argument ('*')"}


class FormatError(ValueError):
    """A format C printf cannot be given safely; ``hint`` says what to write instead."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def conversions(fmt: str) -> list:
    """The conversions (``re.Match``: flags, length, conversion) of ``fmt`` in order, ``%%`` left out."""
    found = []
    for m in SPEC.finditer(fmt):
        conv = m.group(3)
        if conv in _REFUSED:
            raise FormatError(f"printf format {fmt!r}: {_REFUSED[conv]}")
        if conv not in "diouxXceEfgGsp%" or not conv:
            raise FormatError(f"printf format {fmt!r}: '{m.group(0)}' is not a conversion C printf knows",
                              "write '%%' for a literal percent sign")
        if conv != "%":
            found.append(m)
    return found
