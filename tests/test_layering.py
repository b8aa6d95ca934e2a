"""Layering: the project's modules import one another without circles, each only from its own floor or the
floors below; importing the evaluator does not import Gymnasium; a space counts what iterating it yields.

The import graph is read from the source (every ``import`` statement, at module level and inside functions),
so an import hidden in a function body counts as much as one at the top of a file. A package's own
``__init__`` running before its submodules is not counted as an edge (re-exporting packages would otherwise
always form a circle with their submodules).
"""

from __future__ import annotations

import ast
import itertools
import os
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from phaze_env.design import Design, DesignSpace
from phaze_env.hardware.space import ARCH_KNOBS, KNOBS, ArchSpace

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("phaze_env", "search", "baselines", "experiments")

FLOORS = (
    ("phaze_env.cache", "phaze_env.cli", "phaze_env.comm", "phaze_env.files"),  # utilities: import nothing of the project
    ("phaze_env.workloads",),  # model registry, tracing, operator graphs
    ("phaze_env.hardware",),  # accelerator, search space, area, per-op estimator
    ("phaze_env.schedule",),  # the operator ILP of one layer
    ("phaze_env.cluster", "phaze_env.plan_spec", "phaze_env.context_parallel", "phaze_env.attention", "phaze_env.stacks",
     "phaze_env.moe_dispatch", "phaze_env.host"),
    # the system, the plan notation, context-parallel ranks, fused attention kernels, training-stack profiles, MoE
    # token dispatch over the cluster's levels, the host's issue time
    ("phaze_env.placement",),  # the placement DP
    ("phaze_env.pricing", "phaze_env.explain", "phaze_env.evaluate"),  # the one door and its time split
    ("phaze_env.design",),  # a design point and the design space
    ("phaze_env.assumptions",),  # the verdict's assumptions and moving one (rebinds the floors below)
    ("phaze_env.tasks",),  # named benchmark tasks (workload, space, budget, objective) and their stored optima
    # The faces; the root package sits here because ``import gymnasium, phaze_env`` registers the env ids.
    ("phaze_env", "phaze_env.env", "phaze_env.objective", "phaze_env.explain_cli"),
    ("search",),  # exact search
    ("baselines",),  # other search strategies (one of them runs the exact search)
    ("experiments",),  # scripts comparing the strategies
)
"""The import floors, lowest first: a module imports only from its own floor or lower ones. An entry covers a
module and everything under it; the longest matching entry places a module."""


@dataclass(frozen=True)
class Import:
    line: int
    in_function: bool


def project_modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name → source file, for every ``.py`` file of ``packages`` under ``root``."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules) -> set[str]:
    """The project modules one import statement loads (the most specific module each name resolves to)."""
    def resolve(name: str) -> str | None:
        parts = name.split(".")
        return next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in modules), None)

    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module
        names = [f"{base}.{alias.name}" for alias in node.names]  # ``from a import b``: a.b when b is a module
    return {target for target in map(resolve, names) if target is not None and target != module}


def import_graph(root: Path = REPO, packages=PACKAGES) -> dict[str, dict[str, list[Import]]]:
    """``graph[a][b]``: where module ``a`` imports project module ``b`` (module level or inside a function)."""
    modules = project_modules(root, packages)
    graph: dict[str, dict[str, list[Import]]] = {}
    for module, path in modules.items():
        edges: dict[str, list[Import]] = {}
        tree = ast.parse(path.read_text(), filename=str(path))

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _imported_names(child, module, path.name == "__init__.py", modules):
                        edges.setdefault(target, []).append(Import(child.lineno, in_function))
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(tree, False)
        graph[module] = edges
    return graph


def import_cycles(graph) -> list[list[str]]:
    """One circle ``[a, b, …, a]`` per strongly connected component that has one (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_circle_through(graph, min(component), set(component)) for component in components
            if len(component) > 1 or component[0] in graph.get(component[0], ())]


def _circle_through(graph, start: str, members: set[str]) -> list[str]:
    """A shortest circle from ``start`` back to it inside its component (breadth-first)."""
    parent: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph.get(node, ())):
                if target == start:
                    path = [node]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1] + [start]
                if target in members and target not in parent:
                    parent[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected component but on no circle")


def floor_of(module: str, floors=FLOORS) -> tuple[int, str] | None:
    """``(floor, entry)`` of the longest entry covering ``module``; ``None`` when no entry does."""
    matches = [(len(entry), level, entry) for level, entries in enumerate(floors) for entry in entries
               if module == entry or module.startswith(entry + ".")]
    return max(matches)[1:] if matches else None


def upward_imports(graph, floors=FLOORS) -> list[str]:
    """Every import of a module from a higher floor than the importer's, as a readable line."""
    found = []
    for module, edges in sorted(graph.items()):
        for target, imports in sorted(edges.items()):
            (low, _), (high, _) = floor_of(module, floors), floor_of(target, floors)
            if high > low:
                where = ", ".join(f"line {i.line}{' (in a function)' if i.in_function else ''}" for i in imports)
                found.append(f"{module} (floor {low}) imports {target} (floor {high}) at {where}")
    return found


def _describe(cycle: list[str], graph) -> str:
    steps = []
    for a, b in itertools.pairwise(cycle):
        where = ", ".join(f"{i.line}{'f' if i.in_function else ''}" for i in graph[a][b])
        steps.append(f"{a} -[{where}]-> {b}")
    return "; ".join(steps)


# --- the project ---------------------------------------------------------------------------------------------
GRAPH = import_graph()


def test_floors_place_every_module_once():
    for module in GRAPH:
        assert floor_of(module) is not None, f"{module} is on no floor: add it to FLOORS"
        if module.startswith("phaze_env."):
            assert floor_of(module)[1] != "phaze_env", f"{module} is placed only by the root package: give it a floor"
    entries = [entry for floor in FLOORS for entry in floor]
    assert len(entries) == len(set(entries))
    missing = [entry for entry in entries if entry not in GRAPH]
    assert not missing, f"FLOORS names modules that do not exist: {missing}"
    importers_of_main = [(a, b) for a, edges in GRAPH.items() for b in edges if b.endswith(".__main__")]
    assert not importers_of_main, f"a __main__ is a command line, never imported: {importers_of_main}"


def test_no_import_cycles():
    cycles = import_cycles(GRAPH)
    assert not cycles, "import circles (line numbers; f = inside a function):\n" + "\n".join(
        _describe(cycle, GRAPH) for cycle in cycles)


def test_no_upward_imports():
    found = upward_imports(GRAPH)
    assert not found, "imports from a higher floor:\n" + "\n".join(found)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=os.environ | {"PYTHONPATH": str(REPO)})


def test_importing_the_evaluator_does_not_import_gymnasium():
    done = _run("import sys, phaze_env.evaluate; print('gymnasium' in sys.modules)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("imports", ["import gymnasium, phaze_env", "import phaze_env.env, gymnasium"])
def test_gymnasium_users_get_the_env_ids(imports):
    done = _run(f"{imports}; from phaze_env.env import ENV_IDS; print(set(ENV_IDS) <= set(gymnasium.registry))")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"


@pytest.mark.slow
def test_the_hardware_cli_keeps_its_explain_subcommand():
    """``python -m phaze_env.hardware explain`` runs ``phaze_env.explain_cli`` (a child process, not an import)."""
    done = subprocess.run([sys.executable, "-m", "phaze_env.hardware", "explain", "--preset", "tpu5"], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=os.environ | {"PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "tpu5" in done.stderr


# --- one knob order, and len(space) == what iterating it yields ----------------------------------------------------
def test_one_knob_order():
    assert tuple(f.name for f in fields(Design))[:len(KNOBS)] == KNOBS  # then the system space's, default None
    assert tuple(f.name for f in fields(DesignSpace))[:len(KNOBS)] == KNOBS
    assert tuple(f.name for f in fields(ArchSpace))[:len(ARCH_KNOBS)] == ARCH_KNOBS
    assert DesignSpace().to_dict()["knobs"] == list(KNOBS)


SPACES = {
    "reduced": DesignSpace.reduced(),
    "wide": DesignSpace(num_tc=(1, 2, 8, 64, 512), num_vc=(1, 4, 64), tc_depth=(2, 128, 256), hbm_gb=(32.0,)),
    "unsorted lists": DesignSpace(num_tc=(8, 1, 2), tc_width=(128, 64), tc_depth=(128,), num_vc=(2, 1), buffer_mb=(128, 32),
                                  hbm_gb=(80.0, 32.0), microbatch=(1,), recompute=(True, False)),
}


@pytest.mark.slow
def test_len_counts_what_iteration_yields_on_the_full_spaces():
    space = DesignSpace()
    assert len(space) == sum(1 for _ in space) == space.designs
    arch = ArchSpace()
    assert len(arch) == sum(1 for _ in arch) == len(space.arch_space())


@pytest.mark.parametrize("name", sorted(SPACES))
def test_len_counts_what_iteration_yields(name):
    space = SPACES[name]
    designs = list(space)
    assert len(space) == len(designs) == len(set(designs)) == space.designs
    assert all(space.area_ok(d) for d in designs)
    assert designs == sorted(designs, key=space.encode)  # knob-index order
    arch = space.arch_space()
    assert len(arch) == sum(1 for _ in arch) == len(designs) // space.knob_settings
    assert space.combinations == len(list(itertools.product(*(range(n) for n in space.nvec))))


@pytest.mark.parametrize("name", ["reduced", "wide"])
def test_both_spaces_enumerate_architectures_in_the_same_order(name):
    space = SPACES[name]  # value lists sorted: index order is value order
    from_designs = list(dict.fromkeys(tuple(getattr(d, k) for k in ARCH_KNOBS) for d in space))
    from_arch = [tuple(getattr(a, k) for k in ARCH_KNOBS) for a in space.arch_space()]
    assert from_designs == from_arch


# --- the checkers themselves can fail ---------------------------------------------------------------------------
def test_cycle_finder_reports_planted_circles():
    acyclic = {"a": {"b": []}, "b": {"c": []}, "c": {}, "d": {"a": [], "c": []}}
    assert import_cycles(acyclic) == []
    planted = {"a": {"b": []}, "b": {"c": [], "d": []}, "c": {"a": []}, "d": {"d": []}, "e": {"a": []}}
    cycles = import_cycles(planted)
    assert sorted(map(tuple, cycles)) == [("a", "b", "c", "a"), ("d", "d")]
    detour = {"a": {"b": []}, "b": {"z": [], "c": []}, "z": {"b": []}, "c": {"a": []}}  # the walk meets a dead end
    (cycle,) = import_cycles(detour)
    assert cycle[0] == cycle[-1] and all(b in detour[a] for a, b in itertools.pairwise(cycle))


def test_graph_sees_function_level_and_relative_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from pkg.high import g\n")
    (package / "high.py").write_text("from . import low\nfrom .sub import leaf\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "leaf.py").write_text("import os\nimport pkg.low as low\nfrom .. import high\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.low"] == {"pkg.high": [Import(2, True)]}
    assert set(graph["pkg.high"]) == {"pkg.low", "pkg.sub.leaf"}
    assert set(graph["pkg.sub.leaf"]) == {"pkg.low", "pkg.high"}
    assert sorted(map(tuple, import_cycles(graph))) == [("pkg.high", "pkg.low", "pkg.high")]
    floors = (("pkg.low",), ("pkg", "pkg.high"))
    assert upward_imports(graph, floors) == ["pkg.low (floor 0) imports pkg.high (floor 1) at line 2 (in a function)"]


def test_a_pinned_plan_narrows_the_variants_by_one_rule():
    """A pinned ``t`` or ``m`` replaces the list searched (``PlanSpec.narrow``), and no module of the project retypes
    that rule (evaluate, its command line's progress, the search's bounds and the exact search once each had it)."""
    from phaze_env.plan_spec import PlanSpec

    assert PlanSpec().narrow((1, 2, 4), (1, 2)) == ((1, 2, 4), (1, 2))
    assert PlanSpec(t=2).narrow((1, 2, 4), (1, 2)) == ((2,), (1, 2))
    assert PlanSpec(microbatch=4).narrow((1, 2), (1, 2)) == ((1, 2), (4,))
    retyped = [f"{path.relative_to(REPO)}:{number}" for path in project_modules(REPO).values()
               if path.name != "plan_spec.py"
               for number, line in enumerate(path.read_text().splitlines(), 1)
               if "is None else" in line and ("(plan.t,)" in line or "(plan.microbatch,)" in line)]
    assert not retyped, f"the pinned-plan narrowing rule is retyped at {retyped}: call PlanSpec.narrow"
