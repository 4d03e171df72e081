"""The package's layout: sub-packages by stage, imports pointing one way, no cycles.

Stages, lowest first (`STAGES`): a module may import the base modules (`config`, `env`,
`errors`) and modules of its own stage or an earlier one, never a later stage. So preparing
data never pulls in the network, the yardstick (`evaluation`) knows no learner, and only the
run's orchestration and the command line sit on top of everything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rl_trader

PACKAGE = Path(rl_trader.__file__).parent
BASE = ("rl_trader.config", "rl_trader.env", "rl_trader.errors")
STAGES = ("runtime", "data", "evaluation", "agent", "training", "baselines", "report", "run",
          "cli")


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


def stage(module: str) -> int:
    """The stage index of a module; −1 for the base modules. The package itself is of the first
    stage: importing it turns on reproducible kernels (`runtime.reproducible`) before JAX loads."""
    if module in BASE:
        return -1
    if module == "rl_trader":
        return 0
    return STAGES.index(module.split(".")[1])


def test_every_module_is_in_a_stage():
    graph = imports()
    assert {"rl_trader.run.experiment", "rl_trader.data.synthetic",
            "rl_trader.agent.networks"} <= set(graph)
    flat = [m for m in graph if m not in BASE + ("rl_trader",)
            and m.split(".")[1] not in STAGES]
    assert not flat, f"modules outside the stages {STAGES}: {flat}"


def test_imports_point_one_way():
    graph = imports()
    upward = sorted(f"{m} imports {n}" for m, deps in graph.items() for n in deps
                    if stage(n) > stage(m))
    assert not upward, "\n".join(upward)


def test_base_modules_import_only_each_other():
    graph = imports()
    for m in BASE:
        assert graph[m] <= set(BASE), (m, graph[m] - set(BASE))


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


def test_the_package_never_imports_experiments():
    """`experiments` holds research scripts above the package; the installed package runs
    without it, and imports nothing by a name computed at run time."""
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        calls = {n.func.attr for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert not {n for n in names if n.split(".")[0] == "experiments"}, path
        assert "import_module" not in calls, path


def test_nothing_outside_the_heads_branches_on_the_q_head():
    """Each Q-head lives in its own module behind one protocol (`learner.Head`), built by
    `agent.heads.make_head`, the one module besides the config that reads `q_head`."""
    readers = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
               if p.relative_to(PACKAGE).as_posix() not in ("agent/heads.py", "config.py")
               and any(isinstance(n, ast.Attribute) and n.attr == "q_head"
                       for n in ast.walk(ast.parse(p.read_text())))]
    assert not readers, readers


MAX_LINES = 80  # a function longer than this is two functions
MAX_PARAMS = 8  # in the learner (`agent`, `training`): more means a missing dataclass
LEARNER = ("agent", "training")


def functions():
    """(module path, function node) for every function and method in the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield path.relative_to(PACKAGE), node


def test_functions_are_short():
    long = [f"{p}:{f.lineno} {f.name} ({f.end_lineno - f.lineno + 1} lines)"
            for p, f in functions() if f.end_lineno - f.lineno + 1 > MAX_LINES]
    assert not long, long


def test_learner_functions_take_few_parameters():
    many = []
    for p, f in functions():
        a = f.args
        n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
        n -= bool(a.args) and a.args[0].arg in ("self", "cls")
        if p.parts[0] in LEARNER and n > MAX_PARAMS:
            many.append(f"{p}:{f.lineno} {f.name} ({n} parameters)")
    assert not many, many
