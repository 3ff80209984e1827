"""The shape of the source tree: imports run one way through the layers the README's architecture map states,
with no circle, and pyproject.toml lists every package (strassenbench.reference from the top-level reference/)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The layers of strassenbench, lowest first, as the README's architecture map states them: a module imports from
# its own layer (without a circle) and from the layers before it, never from a layer after it. Each layer names
# top-level modules and packages of strassenbench (a package: every module in it); the package's own
# __init__ (its version) is in the first layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("limits", "env", "inject", "readers", "io", "configfile", "results", "samples", "sweeps", "strategies", "families",
     "options", "occupancy", "tensorcore", "gemm", "breakeven", "device"),
    ("algebra",),
    ("plan", "accuracy", "freivalds", "reference"),
    ("fused",),
    ("engines",),
    ("impls",),
    ("model",),
    ("verify", "bench", "doctor", "workflow_config"),
    ("report",),
    ("cli", "__main__"),
)
STATEMENT = "Imports run one way, lowest layer first: " + " -> ".join(", ".join(layer) for layer in LAYERS)
IMPORTERS = {"import_module", "__import__"}  # importlib's, and the builtin, with a constant name


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def modules(root: Path, package: str, mapped: dict[str, str]) -> dict[str, Path]:
    """Every module of ``package`` (its folder under ``root``) by dotted name, and of the packages ``mapped``
    to folders of their own (setuptools' package-dir), with their subpackages."""
    found: dict[str, Path] = {}
    for name, folder in {package: root / package, **{k: root / v for k, v in mapped.items()}}.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement (or import_module/__import__ with a constant name) may load."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = module.split(".")[: len(module.split(".")) - node.level + is_package]
            base = ".".join(parts + ([node.module] if node.module else []))
        return [f"{base}.{alias.name}" for alias in node.names] + [base]
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in IMPORTERS:
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def import_graph(found: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {module of the package it imports: line}, every import statement included: at module level,
    inside functions and classes, under ``if``/``try``. ``from x import y`` imports x.y when that is a module,
    else x."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in found.items():
        edges = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = _targets(node, module, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom):  # x.y where y is a module, else x itself
                names = [n for n in names[:-1] if n in found] or names[-1:]
            for name in names:
                while name and name not in found:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    edges.setdefault(name, node.lineno)
    return graph


def layer_of(module: str, package: str = "strassenbench", layers: tuple[tuple[str, ...], ...] = LAYERS) -> int | None:
    """The index of ``module``'s layer in ``layers``; None when no layer names it."""
    top = module.removeprefix(package).lstrip(".").split(".")[0] or "__init__"
    if top == "__init__":
        return 0
    return next((i for i, layer in enumerate(layers) if top in layer), None)


def circle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order, the first repeated last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    return next((found for node in sorted(graph) if node not in state and (found := visit(node))), None)


def upward(graph: dict[str, dict[str, int]], package: str = "strassenbench",
           layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """Every import from a lower layer to a higher one, as 'module (layer) line N imports module (layer)'."""
    found = []
    for module, edges in sorted(graph.items()):
        low = layer_of(module, package, layers)
        for target, line in sorted(edges.items()):
            high = layer_of(target, package, layers)
            if high is not None and low is not None and high > low:
                found.append(f"{module} ({', '.join(layers[low])}) line {line} imports {target} "
                             f"({', '.join(layers[high])})")
    return found


def _graph() -> dict[str, dict[str, int]]:
    return import_graph(modules(ROOT, "strassenbench", _pyproject().get("package-dir", {})))


def test_imports_follow_the_layers() -> None:
    """Every module of strassenbench is in a layer; no import, at module level or nested in a function, runs
    from a layer to a later one, and no modules import each other in a circle."""
    graph = _graph()
    assert len(graph) > 50 and "strassenbench.reference.strassen_ref" in graph  # the walk sees the whole package
    unplaced = sorted({m.split(".")[1] for m in graph if layer_of(m) is None})
    assert not unplaced, f"modules in no layer of LAYERS (place them, and in the README's map): {unplaced}"
    assert upward(graph) == []
    assert circle(graph) is None, " -> ".join(circle(graph))


def test_the_checks_see_nested_imports_circles_and_imports_up(tmp_path: Path) -> None:
    """The walk on a small package: an import inside a function counts, a circle and an import up are named."""
    folder = tmp_path / "pkg"
    (folder / "sub").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "low.py").write_text("def f():\n    from .sub import high\n")
    (folder / "sub" / "__init__.py").write_text("from . import high\n")
    (folder / "sub" / "high.py").write_text("import importlib\nfrom .. import low\nimportlib.import_module('pkg.low')\n")
    graph = import_graph(modules(tmp_path, "pkg", {}))
    assert graph["pkg.low"] == {"pkg.sub.high": 2} and graph["pkg.sub.high"] == {"pkg.low": 2}
    assert circle(graph) in (["pkg.low", "pkg.sub.high", "pkg.low"], ["pkg.sub.high", "pkg.low", "pkg.sub.high"])
    layers = (("low",), ("sub",))
    assert upward(graph, "pkg", layers) == ["pkg.low (low) line 2 imports pkg.sub.high (sub)"]
    assert upward({"pkg.sub.high": {"pkg.low": 2}}, "pkg", layers) == [] and circle({"a": {"b": 1}}) is None


def test_the_readme_map_states_the_layers() -> None:
    """The README's architecture map states LAYERS word for word (line breaks and indentation aside)."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert STATEMENT in readme, f"README.md's map does not state: {STATEMENT}"


def test_pyproject_lists_every_package_and_maps_the_reference_folder() -> None:
    """Every package of the source tree is in pyproject.toml (a wheel carries it); strassenbench.reference is
    the top-level reference/ folder through package-dir, imported from there, with no __path__ rewritten."""
    setuptools = _pyproject()
    mapped = setuptools["package-dir"]
    assert mapped == {"strassenbench.reference": "reference"} and not (ROOT / "strassenbench" / "reference").exists()
    tree = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "strassenbench").rglob("__init__.py")}
    assert sorted(setuptools["packages"]) == sorted(tree | set(mapped))
    import strassenbench.reference.strassen_ref as strassen_ref

    assert Path(strassen_ref.__file__).resolve() == ROOT / "reference" / "strassen_ref.py"
    found = modules(ROOT, "strassenbench", mapped)
    rewrites = [m for m, path in found.items() if re.search(r"\b__path__\s*(\.\w+\(|\+?=)", path.read_text())]
    assert rewrites == []


MAX_FILE_LINES, MAX_FUNCTION_LINES = 450, 70
# Every module of the package (the command line's among them): none past the limits above.
SIZED = ("strassenbench/**/*.py",)


def oversized(path: Path) -> list[str]:
    """What of ``path`` is past the limits: the file (more than MAX_FILE_LINES lines) and each function or method,
    nested ones included (more than MAX_FUNCTION_LINES lines, its decorators and docstring counted)."""
    text = path.read_text()
    found = [f"{path.name}: {len(text.splitlines())} lines"] if len(text.splitlines()) > MAX_FILE_LINES else []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if node.end_lineno - first + 1 > MAX_FUNCTION_LINES:
                found.append(f"{path.name}:{node.lineno} {node.name}: {node.end_lineno - first + 1} lines")
    return found


def test_cli_package_sizes(tmp_path: Path) -> None:
    """The command line is a package of modules, each with add_parser and run; no file of the package is over
    450 lines, no function over 70. The walk itself finds a long file and a long nested function."""
    import strassenbench.cli as cli

    paths = sorted({p for pattern in SIZED for p in ROOT.glob(pattern)})
    assert len(paths) >= 60 and not (ROOT / "strassenbench" / "cli.py").exists()
    assert [p for p in paths if oversized(p)] == [], [line for p in paths for line in oversized(p)]
    for group in cli.GROUPS:
        assert callable(group.add_parser) and callable(group.run), group.__name__
    body = "".join(["            x = 1\n"] * MAX_FUNCTION_LINES)  # g: its def and 70 lines; f: 72 lines
    short = "def h():\n" + "".join(["    y = 2\n"] * (MAX_FUNCTION_LINES - 1))  # 70 lines: within the limit
    (tmp_path / "long.py").write_text(f"class A:\n    def f(self):\n        def g():\n{body}\n{short}")
    assert oversized(tmp_path / "long.py") == ["long.py:2 f: 72 lines", "long.py:3 g: 71 lines"]
    (tmp_path / "long.py").write_text(short + "\n" * (MAX_FILE_LINES - MAX_FUNCTION_LINES + 1))
    assert oversized(tmp_path / "long.py") == ["long.py: 451 lines"]


# What the report may take of strassenbench.model: the names and reader of the model's files, data only.
REPORT_MODEL_DATA = {"strassenbench.model.files"}
# The model's computations by name: none of them is imported into the report, from wherever it is re-exported.
MODEL_COMPUTATIONS = {"predict", "crossover", "impl_time", "active_blocks", "bounds_rows", "best_strategy",
                      "kernel_time", "tensor_kernel_time", "spec_rows", "occupancy_rows", "issue_bound_rows",
                      "speedup_rows", "get_gpu", "query_device", "spec_from_attributes", "slice_counts"}


def model_imports(graph: dict[str, dict[str, int]], found: dict[str, Path], package: str) -> list[str]:
    """Every import of ``package``'s modules that reaches the model's computations: a module of
    strassenbench.model other than REPORT_MODEL_DATA, or a name of MODEL_COMPUTATIONS (nested imports too)."""
    bad = [f"{module} line {line} imports {target}" for module, edges in sorted(graph.items())
           if module.startswith(package) for target, line in sorted(edges.items())
           if target.startswith("strassenbench.model") and target not in REPORT_MODEL_DATA]
    for module, path in sorted(found.items()):
        if module.startswith(package):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = {alias.name.rpartition(".")[2] for alias in node.names}
                    bad += [f"{module} line {node.lineno} imports {name}"
                            for name in sorted(names & MODEL_COMPUTATIONS)]
    return sorted(bad)


def test_report_computes_no_model(tmp_path: Path) -> None:
    """The report reads every model number from the files `strassenbench model` writes: no module of
    strassenbench.report imports a module of strassenbench.model but its files' names and reader (which import
    nothing of the model), nor any of the model's computations by name. The check sees a nested import."""
    found = modules(ROOT, "strassenbench", _pyproject().get("package-dir", {}))
    graph = import_graph(found)
    assert any(m.startswith("strassenbench.report.") for m in graph) and "strassenbench.model.files" in graph
    assert model_imports(graph, found, "strassenbench.report") == []
    assert [t for t in graph["strassenbench.model.files"] if t.startswith("strassenbench.model")] == []
    # a module of the report (kept in tmp_path) that imports the model inside a function, and a computation
    # that another module re-exports
    (tmp_path / "planted.py").write_text("def draw():\n    from ..model.predict import predict\n"
                                         "from .tables import impl_time\n")
    found = {**found, "strassenbench.report.planted": tmp_path / "planted.py"}
    assert model_imports(import_graph(found), found, "strassenbench.report.planted") == [
        "strassenbench.report.planted line 2 imports predict",
        "strassenbench.report.planted line 2 imports strassenbench.model.predict",
        "strassenbench.report.planted line 3 imports impl_time"]


def test_report_sizes() -> None:
    """No module of strassenbench.report is over 450 lines, no function of it over 70."""
    paths = sorted((ROOT / "strassenbench" / "report").glob("*.py"))
    assert len(paths) >= 8
    assert [line for p in paths for line in oversized(p)] == []


def test_module_names_say_their_layer() -> None:
    """No two modules outside strassenbench.cli share a name (a package's __init__ aside): tables.py in the model
    and in the report were two homes for one word."""
    names: dict[str, list[str]] = {}
    for path in [*(ROOT / "strassenbench").rglob("*.py"), *(ROOT / "reference").rglob("*.py")]:
        if path.name != "__init__.py" and "cli" not in path.relative_to(ROOT).parts:
            names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}


def test_workflow_rule_files_and_readme_lines_are_short() -> None:
    """Every workflow rule file is under 200 lines, and no README line is over 300 characters."""
    rules = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "workflow" / "rules").glob("*.smk")}
    assert len(rules) >= 8 and {name: n for name, n in rules.items() if n >= 200} == {}
    long = [i for i, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1) if len(line) > 300]
    assert long == []
