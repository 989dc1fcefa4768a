"""Architecture guards: the import graph and the file sizes the design promises.

In the spirit of import contracts (napari, import-linter), but with ``ast`` only: every
``import`` in ``engine/``, ``gui/`` and ``resources/`` — at module level, inside a
function, under ``if TYPE_CHECKING`` or as a literal ``importlib.import_module("…")`` —
is an edge of one graph. A function-level import that breaks a cycle at run time still
draws the edge, so it cannot hide the cycle here. The rules:

- no import cycle at all;
- no import against the layering (``FORBIDDEN`` below);
- no Python file over ``MAX_LINES`` in engine/, gui/, tests/ or packaging/;
- at most ``MAX_ROOT_MODULES`` modules at the engine root (the rest live in packages);
- at most ``MAX_GUI_ROOT_MODULES`` modules at the GUI root, ``__init__`` and ``__main__``
  included (the rest live in feature folders: ``gui/compare/``, ``gui/fields/`` …).

An edge goes to the most specific module it names: ``from engine.layout import counts``
is an edge to ``engine.layout.counts`` (a module), ``from engine.layout import Layout``
one to ``engine.layout`` (the package's ``__init__``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "gui", "resources")
SIZE_CHECKED = ("engine", "gui", "tests", "packaging")
MAX_LINES = 400
MAX_ROOT_MODULES = 12
MAX_GUI_ROOT_MODULES = 20

Graph = Mapping[str, Mapping[str, int]]  # importer -> {imported module: first line}


@dataclass(frozen=True)
class Rule:
    """Modules under ``importer`` (and not under ``exempt``) must not import ``imported``."""

    importer: str
    imported: tuple[str, ...]
    why: str
    exempt: tuple[str, ...] = ()


FORBIDDEN: tuple[Rule, ...] = (
    Rule("engine", ("gui",), "the engine never depends on the GUI (it runs without Qt)"),
    Rule(
        "engine.ledger",
        ("engine.estimate", "engine.layout", "engine.whatif", "engine.analysis", "engine.cli"),
        "the ledger counts bytes of one layout; searches and front ends are built on it",
    ),
    Rule(
        "",
        ("engine.cli",),
        "only the command line and the GUI's console script mount the CLI",
        exempt=("engine.cli", "gui"),
    ),
)


LEDGER_FACE = frozenset({"engine.ledger"})
"""The ledger's public face: its package (``engine/ledger/__init__.py``). Everything
else under ``engine.ledger.`` is an internal, which in ``engine.layout`` only the
proofs may read: they are the search's only knowledge of rows."""
LEDGER_READERS = "engine.layout.proofs"


# the graph -------------------------------------------------------------------------
def under(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it; the empty prefix holds everything."""
    return not prefix or module == prefix or module.startswith(prefix + ".")


def module_files(repo: Path = REPO) -> dict[str, Path]:
    """Dotted module name → file, for every module of the walked packages."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((repo / pkg).rglob("*.py")):
            parts = list(path.relative_to(repo).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolve(name: str, known: Iterable[str]) -> str | None:
    """The longest known module that ``name`` is or lies inside (None: external)."""
    known = set(known)
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in known:
            return candidate
    return None


def _literal_import_module(node: ast.Call) -> str | None:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in {"import_module", "__import__"} or not node.args:
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def imports_of(module: str, source: str, is_package: bool, known: set[str]) -> dict[str, int]:
    """Internal modules ``module`` imports anywhere in ``source``, with the first line."""
    package = module if is_package else module.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(name: str | None, line: int) -> None:
        target = _resolve(name, known) if name else None
        if target and target != module:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                add(f"{base}.{alias.name}" if base else alias.name, node.lineno)
        elif isinstance(node, ast.Call):
            add(_literal_import_module(node), node.lineno)
    return dict(sorted(found.items()))


def import_graph(repo: Path = REPO) -> dict[str, dict[str, int]]:
    files = module_files(repo)
    known = set(files)
    return {
        m: imports_of(m, p.read_text(encoding="utf-8"), p.name == "__init__.py", known)
        for m, p in files.items()
    }


def find_cycles(graph: Graph) -> list[list[str]]:
    """One concrete cycle (a → b → … → a) per strongly connected component of more
    than one module (Tarjan's algorithm, iterative: the graph has hundreds of nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        components.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, {})))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return [_cycle_in(comp, graph) for comp in sorted(components)]


def _cycle_in(component: list[str], graph: Graph) -> list[str]:
    """The shortest cycle through the component's first module (breadth-first)."""
    members, start = set(component), component[0]
    parent: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, {})):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if nxt in members and nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start} in its component {component}")


def forbidden_edges(graph: Graph, rules: Iterable[Rule] = FORBIDDEN) -> list[str]:
    out = []
    for rule in rules:
        for importer, targets in sorted(graph.items()):
            if not under(importer, rule.importer):
                continue
            if any(under(importer, e) for e in rule.exempt):
                continue
            for target, line in targets.items():
                if any(under(target, t) for t in rule.imported):
                    out.append(f"{importer} (line {line}) → {target}: {rule.why}")
    return out


def _chain(cycle: list[str], graph: Graph) -> str:
    return " → ".join(
        f"{m} (line {graph[m][cycle[i + 1]]})" if i + 1 < len(cycle) else m
        for i, m in enumerate(cycle)
    )


# the guards ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return import_graph()


def test_no_import_cycles(graph: dict[str, dict[str, int]]) -> None:
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(_chain(c, graph) for c in cycles)


def test_no_imports_against_the_layering(graph: dict[str, dict[str, int]]) -> None:
    bad = forbidden_edges(graph)
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def _python_files() -> list[Path]:
    return sorted(p for d in SIZE_CHECKED for p in (REPO / d).rglob("*.py"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_file_over_the_line_limit() -> None:
    long = {str(p.relative_to(REPO)): _lines(p) for p in _python_files() if _lines(p) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines (split them by responsibility): " + (
        ", ".join(f"{k} ({v})" for k, v in sorted(long.items()))
    )


def test_engine_root_stays_small() -> None:
    root = sorted(p.stem for p in (REPO / "engine").glob("*.py") if p.stem != "__init__")
    assert len(root) <= MAX_ROOT_MODULES, (
        f"{len(root)} modules at the engine root (at most {MAX_ROOT_MODULES}); move some "
        f"into a package: {', '.join(root)}"
    )


def test_gui_root_stays_small() -> None:
    """The window's features live in folders (issue 34): a newcomer reads ``gui/`` as
    the app's core (app, main window, document, settings) and a list of features."""
    root = sorted(p.name for p in (REPO / "gui").glob("*.py"))
    assert len(root) <= MAX_GUI_ROOT_MODULES, (
        f"{len(root)} modules at the GUI root (at most {MAX_GUI_ROOT_MODULES}); move some "
        f"into a feature folder: {', '.join(root)}"
    )


def _own_module(node: ast.ImportFrom) -> bool:
    """Whether an import names one of MemPlan's own modules (or is relative)."""
    top = (node.module or "").split(".")[0]
    return node.level > 0 or top in (*PACKAGES, "tests")


def test_no_private_name_imported_from_another_module() -> None:
    """``from x import _name`` reaches into another module's internals: make the name
    public (and documented) or move the code that needs it. Only MemPlan's own modules
    count: the tracer must use PyTorch's private memory-tracker types, which is the
    documented cost of building on ``torch.distributed._tools``."""
    bad = []
    for path in sorted(p for d in (*PACKAGES, "tests") for p in (REPO / d).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and _own_module(node):
                names = [a.name for a in node.names if a.name.startswith("_")]
                names = [n for n in names if not (n.startswith("__") and n.endswith("__"))]
                if names:
                    where = f"{path.relative_to(REPO)}:{node.lineno}"
                    bad.append(f"{where} imports {', '.join(names)} from {node.module}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def ledger_internal_edges(graph: Graph, package: str = "engine.layout") -> list[str]:
    """Imports of a ledger internal by a module of ``package`` outside the proofs."""
    return [
        f"{importer} (line {line}) → {target}"
        for importer, targets in sorted(graph.items())
        if under(importer, package) and not under(importer, LEDGER_READERS)
        for target, line in targets.items()
        if under(target, "engine.ledger") and target not in LEDGER_FACE
    ]


def test_only_the_proofs_read_ledger_internals(graph: dict[str, dict[str, int]]) -> None:
    """A row the lattice or the search read directly would carry obligations no proof
    states: route the fact through ``engine.layout.proofs``' face instead."""
    bad = ledger_internal_edges(graph)
    assert not bad, "ledger internals imported outside engine.layout.proofs:\n" + "\n".join(bad)


LATTICE = ("engine.layout.point", "engine.layout.shapes", "engine.layout.candidates")
SEARCH = (
    "engine.layout.minimum",
    "engine.layout.counts",
    "engine.layout.beside",
    "engine.layout.levers",
)
LAYOUT_LAYERS = (
    *(Rule(m, SEARCH, "the lattice is below the search") for m in LATTICE),
    Rule("engine.layout.proofs", SEARCH, "the proofs are below the search"),
)


def test_layout_layers(graph: dict[str, dict[str, int]]) -> None:
    """lattice → proofs → search, never the other way (the lattice reads only the proofs'
    face); every module named in the rules exists (a renamed one would guard nothing)."""
    bad = forbidden_edges(graph, LAYOUT_LAYERS)
    bad += [f"{m}: no such module" for m in (*LATTICE, *SEARCH) if m not in graph]
    assert not bad, "imports against engine.layout's layers:\n" + "\n".join(bad)


# the guards can fail ---------------------------------------------------------------
def test_cycle_finder_on_a_synthetic_graph() -> None:
    """a → b → c → a is one cycle, reported from its first module; d → e is none; the
    self-contained pair x ⇄ y is another."""
    g = {
        "a": {"b": 1},
        "b": {"c": 2},
        "c": {"a": 3, "d": 4},
        "d": {"e": 5},
        "e": {},
        "x": {"y": 6},
        "y": {"x": 7},
    }
    assert find_cycles(g) == [["a", "b", "c", "a"], ["x", "y", "x"]]
    assert _chain(["a", "b", "c", "a"], g) == "a (line 1) → b (line 2) → c (line 3) → a"
    assert find_cycles({"a": {"b": 1}, "b": {}}) == []


def test_function_level_import_draws_an_edge() -> None:
    """A cycle hidden by an import inside a function is still an edge here."""
    known = {"engine.cli", "engine.cli.text", "engine.cli.common"}
    src = "from engine.cli import common\n\ndef f():\n    from . import text\n"
    assert imports_of("engine.cli.common", src, False, known) == {"engine.cli.text": 4}
    src = "from .common import plan_args\nimport_module('engine.cli.text')\n"
    assert imports_of("engine.cli", src, True, known) == {
        "engine.cli.common": 1,
        "engine.cli.text": 2,
    }


def test_layering_rules_catch_a_wrong_edge() -> None:
    g = {
        "engine.ledger.rows": {"engine.layout": 3, "engine.units": 1},
        "engine.plan": {"gui.display": 9},
        "engine.whatif.fit": {"engine.cli.common": 5},
        "engine.cli.text": {"engine.cli.common": 2},
        "gui.app": {"engine.cli": 4},
    }
    assert forbidden_edges(g) == [
        "engine.plan (line 9) → gui.display: " + FORBIDDEN[0].why,
        "engine.ledger.rows (line 3) → engine.layout: " + FORBIDDEN[1].why,
        "engine.whatif.fit (line 5) → engine.cli.common: " + FORBIDDEN[2].why,
    ]


def test_ledger_rule_catches_an_internal_import() -> None:
    """The search importing ``stage_rows`` is caught; the same import in a proof, and the
    ledger's face anywhere, are not."""
    search, proof = "engine.layout.counts", "engine.layout.proofs.bound"
    known = {"engine.ledger", "engine.ledger.stage_rows", search, proof}
    internal = "from engine.ledger.stage_rows import shared_rows\n"
    face = "from engine.ledger import DYNAMIC_IDS\n"
    g = {
        search: imports_of(search, internal + face, False, known),
        proof: imports_of(proof, internal, False, known),
    }
    assert ledger_internal_edges(g) == [f"{search} (line 1) → engine.ledger.stage_rows"]
