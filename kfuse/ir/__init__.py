"""The typed kernel IR: small frozen nodes lowered from a kernel's Python AST after type inference.

``lower`` builds it, ``dump`` prints it, ``verify`` checks it, and ``access`` is the one analysis of
which View elements a kernel touches. It depends on nothing of kfuse but its types and errors, so the
front end, the fuser, the transforms and codegen can all use it.
"""
