"""kfuse's parts import each other in one direction only (imports inside functions count too), and only
config.py touches the environment.

A cycle between parts means two stages that cannot be understood, tested or replaced apart; these tests
read the source (no compiler, no kfuse import) and name the offending place.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

KFUSE = Path(__file__).resolve().parent.parent / "kfuse"


def _part(module: str) -> str:
    """``kfuse.runtime.launch`` -> ``runtime``; a top-level module is its own part."""
    return module.split(".")[1] if "." in module else module


def _module_of(path: Path) -> str:
    parts = path.relative_to(KFUSE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_graph() -> dict:
    """part -> the parts its modules import (relative imports within kfuse)."""
    graph: dict = {}
    for path in KFUSE.rglob("*.py"):
        module = _module_of(path)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        source = _part(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            targets = [".".join(base + [node.module])] if node.module else [".".join(base + [a.name]) for a in node.names]
            for target in targets:
                part = _part(target)
                if part != source and source != "kfuse" and part != "kfuse":
                    graph.setdefault(source, set()).add(part)
    return graph


def find_cycle(graph: dict) -> list | None:
    state: dict = {}
    stack: list = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_parts_of_kfuse_form_no_import_cycle():
    cycle = find_cycle(part_graph())
    assert cycle is None, "import cycle between kfuse's parts: " + " -> ".join(cycle)


@pytest.mark.parametrize("graph, cycle", [({"a": {"b"}, "b": {"c"}}, None),
                                          ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"])])
def test_the_cycle_finder_itself(graph, cycle):
    assert find_cycle(graph) == cycle


def test_only_config_reads_the_environment():
    """Every KFUSE_* setting (and any other variable) is read through kfuse/config.py, where it is documented."""
    readers = []
    for path in KFUSE.rglob("*.py"):
        if path.name == "config.py" and path.parent == KFUSE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                    and node.attr in ("environ", "getenv", "putenv"):
                readers.append(f"{path.relative_to(KFUSE.parent)}:{node.lineno}")
    assert not readers, "the environment is used outside kfuse/config.py: " + ", ".join(readers)


def test_the_graph_sees_imports_inside_functions():
    # kernel_api reaches the backends only from inside a function (pk.printf in the Debug space)
    assert "backends" in part_graph()["kernel_api"]


def test_settings_follow_the_environment_as_it_changes(monkeypatch):
    """Settings are read when asked, from whatever ``os.environ`` says at that moment (parsed values are
    reused only while the environment's value is the same object)."""
    from kfuse import config

    monkeypatch.delenv("KFUSE_MAX_TRACE", raising=False)
    assert config.MAX_TRACE.get() == 4096
    seen = []
    for value in ("7", "7", "12", "", " 5"):
        monkeypatch.setenv("KFUSE_MAX_TRACE", value)
        seen.append(config.MAX_TRACE.get())
    monkeypatch.delenv("KFUSE_MAX_TRACE")
    seen.append(config.MAX_TRACE.get())
    config.put(config.MAX_TRACE, 3)
    seen.append(config.MAX_TRACE.get())
    with config.overridden(config.MAX_TRACE, 9):
        seen.append(config.MAX_TRACE.get())
    seen.append(config.MAX_TRACE.get())
    monkeypatch.delenv("KFUSE_MAX_TRACE")
    assert seen == [7, 7, 12, 4096, 5, 4096, 3, 9, 3]
    assert config.FUSION.get() is None and config.TRANSFORMS.get() == config.TRANSFORMS.default
