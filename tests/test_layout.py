"""The package's layout: no import cycles, and data flows one way (data never imports model)."""

from __future__ import annotations

import ast
from pathlib import Path

import rl_trader

PACKAGE = Path(rl_trader.__file__).parent
DATA_LAYER = ("rl_trader.data", "rl_trader.data.loader", "rl_trader.data.synthetic",
              "rl_trader.features", "rl_trader.folds", "rl_trader.fold_data", "rl_trader.env")
MODEL_LAYER = ("rl_trader.networks", "rl_trader.agent", "rl_trader.replay", "rl_trader.train",
               "rl_trader.population", "rl_trader.experiment")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Every rl_trader module → the rl_trader modules it imports anywhere in its source
    (top level, inside functions and under TYPE_CHECKING alike)."""
    graph: dict[str, set[str]] = {}
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    for path in PACKAGE.rglob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found |= {n for n in names if n in modules}
        graph[module_name(path)] = found - {module_name(path)}
    return graph


def test_the_graph_sees_the_whole_package():
    graph = imports()
    assert {"rl_trader.experiment", "rl_trader.data.synthetic", "rl_trader.networks"} <= set(graph)
    assert "rl_trader.prepare" in graph["rl_trader.experiment"]


def test_no_import_cycles():
    graph = imports()
    state: dict[str, str] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for n in sorted(graph[m]):
            assert state.get(n) != "open", "import cycle: " + " → ".join(path + [m, n])
            if n not in state:
                visit(n, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_the_data_layer_does_not_import_the_model():
    graph = imports()
    for m in DATA_LAYER:
        assert not graph[m] & set(MODEL_LAYER), (m, graph[m] & set(MODEL_LAYER))


def test_only_the_command_line_reaches_up_to_experiments():
    """`rl_trader.cli` dispatches to `experiments` (the layer above the package), by name and
    only when run; no other module imports experiments, and no module imports the cli."""
    graph = imports()
    assert not [m for m, deps in graph.items() if "rl_trader.cli" in deps]
    for path in PACKAGE.rglob("*.py"):
        if module_name(path) == "rl_trader.cli":
            continue
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        calls = {n.func.attr for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert not {n for n in names if n.split(".")[0] == "experiments"}, path
        assert "import_module" not in calls, path
