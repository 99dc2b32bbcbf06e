"""Origin marks on a fused member's kernel AST, which the IR lowering (``kfuse.ir.lower``) reads so that a
fault in a fused kernel names the member that faulted, as the unfused call would."""
from __future__ import annotations

import ast


def mark_origin(tree: ast.AST, workunit: str, filename: str, member: int) -> None:
    """Tag every node of a member's AST before fusion renames it: faults in the fused kernel then name the
    member (its position, workunit, file and, for Views, its own parameter name)."""
    for node in ast.walk(tree):
        node.kf_origin = (workunit, filename, getattr(node, "id", None), member)
