"""The layout's arrows point only downward (docs/architecture.md): every project import,
at module level or inside a function, goes to the same layer or a lower one, and the
module import graph has no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO_ROOT

# Bottom to top.
LAYERS = ("evaluator", "generator", "composition", "publishing", "predictors", "reports", "cli")
PACKAGES = ("generator", "composition", "publishing", "predictors", "reports")


def _layer(module: str) -> str | None:
    top = module.split(".")[0]
    if top == "exbind":
        return "cli"
    if top.startswith("exbind_"):
        return "evaluator"
    return top if top in PACKAGES else None


def _project_modules() -> dict[str, Path]:
    found = {p.stem: p for p in REPO_ROOT.glob("*.py")}
    for pkg in PACKAGES:
        for path in (REPO_ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    out = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _project_modules()
    known = set(modules)
    return {m: _imports(p, m, known) for m, p in modules.items()}


def test_imports_point_only_downward():
    upward = sorted(
        f"{m} -> {d}" for m, deps in _graph().items() for d in deps
        if LAYERS.index(_layer(d)) > LAYERS.index(_layer(m))
    )
    assert upward == []


def test_module_import_graph_has_no_cycle():
    graph = _graph()
    # A package's __init__ importing its own submodules is not a cycle of concerns.
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []
