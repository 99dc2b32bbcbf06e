"""Fault sites: where a checked operation is, for the message a fault there produces (``KfSite`` in the
prelude). A kernel numbers its sites in one table, ``kf_sites``; a checked operation passes its number."""
from __future__ import annotations

from dataclasses import dataclass


def c_string(text: str) -> str:
    """A C string literal with ``text``'s UTF-8 bytes; octal escapes, since a hex escape would swallow
    following hex digits (``"\\x01a"`` is one character in C)."""
    escapes = {ord("\n"): "\\n", ord("\t"): "\\t", ord('"'): '\\"', ord("\\"): "\\\\"}
    return '"' + "".join(escapes.get(b) or (chr(b) if 32 <= b < 127 else f"\\{b:03o}")
                         for b in text.encode("utf-8")) + '"'


@dataclass(frozen=True)
class FaultSite:
    kind: str  # "floordiv" | "mod" | "index" | "scratch" | "scratch_extent" | "scratch_refused"
    workunit: str
    function: str  # the @pk.function holding the check, or ""
    filename: str
    line: int
    view: str = ""
    member: int = -1  # the call's position in a fused kernel (-1: not fused), to tell calls of one workunit apart

    def cpp(self) -> str:
        return (f"{{{c_string(self.kind)}, {c_string(self.workunit)}, {c_string(self.function)}, "
                f"{c_string(self.filename)}, {self.line}, {c_string(self.view)}, {self.member}}}")
