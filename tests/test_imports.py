"""The import graph of `elara/` has no cycle and keeps its layers; no class or function is two things.

A cycle hidden by a function-level import still couples two modules both ways; the next change to
either can turn it into an ImportError at start-up, so none is allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "elara"


def module_name(path: Path, root: Path = ROOT) -> str:
    """`elara/voice/models.py` → `elara.voice.models`; `elara/voice/__init__.py` → `elara.voice`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module under the package, by dotted name."""
    return {module_name(path, package.parent): path for path in sorted(package.rglob("*.py"))}


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name a (possibly relative) `from … import` refers to."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The elara modules `module` imports anywhere in its body (top level, functions, TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(name: str) -> None:
        # `import elara.a.b` runs elara.a.b; the closest known module is the one imported.
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "elara":
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node.level, node.module)
            if source.split(".")[0] != "elara":
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                # `from elara.voice import models` imports the submodule, not a name in __init__.
                add(submodule if submodule in known else source)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module → the elara modules it imports."""
    modules = all_modules(package)
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path that starts and ends at the same module, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished without a cycle
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_elara_has_no_import_cycle():
    graph = import_graph()
    assert "elara.voice.models" in graph and "elara.cli" in graph  # the walk found the package
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_model_resolution_imports_no_engine():
    """Resolving names to files must not pull in the engines that load them (or their libraries)."""
    graph = import_graph()
    engines = {"elara.voice.stt", "elara.voice.tts", "elara.voice.vad", "elara.voice.wake",
               "elara.service.engines"}
    assert not graph["elara.voice.models"] & engines
    tree = ast.parse((PACKAGE / "voice" / "models.py").read_text(encoding="utf-8"))
    libraries = {"faster_whisper", "piper", "onnxruntime", "openwakeword", "ctranslate2"}
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert not imported & libraries


def test_conversation_does_not_import_memory():
    """Memory builds on the conversation store; the other way round would be a package cycle."""
    graph = import_graph()
    reaching = {(name, target) for name, targets in graph.items() if name.startswith("elara.conversation")
                for target in targets if target.startswith("elara.memory")}
    assert not reaching


def _write(root: Path, name: str, text: str) -> None:
    path = root / Path(*name.split("."))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".py").write_text(text)


@pytest.fixture
def fake_package(tmp_path):
    """A tiny `elara` package in tmp_path."""
    root = tmp_path / "elara"
    _write(tmp_path, "elara.__init__", "")
    _write(tmp_path, "elara.voice.__init__", "")
    return root


def test_a_cycle_hidden_in_a_function_is_found(fake_package, tmp_path):
    _write(tmp_path, "elara.voice.models", "def check():\n    from elara.voice.stt import load\n")
    _write(tmp_path, "elara.voice.stt", "from elara.voice import models\n")
    cycle = find_cycle(import_graph(fake_package))
    assert cycle == ["elara.voice.models", "elara.voice.stt", "elara.voice.models"]


def test_a_relative_import_counts_and_an_acyclic_graph_passes(fake_package, tmp_path):
    _write(tmp_path, "elara.voice.models", "import os\n")
    _write(tmp_path, "elara.voice.stt", "from . import models\nfrom .models import check\n")
    _write(tmp_path, "elara.cli", "import elara.voice.stt\n")
    graph = import_graph(fake_package)
    assert graph["elara.voice.stt"] == {"elara.voice.models"}
    assert graph["elara.cli"] == {"elara.voice.stt"}
    assert find_cycle(graph) is None
    _write(tmp_path, "elara.voice.models", "from ..cli import main\n")
    assert find_cycle(import_graph(fake_package)) == [
        "elara.cli", "elara.voice.stt", "elara.voice.models", "elara.cli"]


#: Modules every part may import: the settings, the errors, the machine's places, durable
#: writes and native thread pools, and the retry backoff (each imports nothing of Elara but these).
FOUNDATION = {"elara", "elara.settings", "elara.errors", "elara.service.paths", "elara.service.files",
              "elara.service.openmp", "elara.service.backoff"}

#: What each package may import besides the foundation: the layers, lowest first. The
#: conversation and memory know nothing of sound; nothing below the service knows the daemon.
LAYERS = {
    "elara.audio": set(),
    "elara.conversation": set(),
    "elara.memory": {"elara.conversation"},
    "elara.skills": {"elara.conversation", "elara.memory", "elara.audio"},
    "elara.tools": {"elara.conversation", "elara.memory", "elara.skills"},
    "elara.brain": {"elara.conversation", "elara.memory", "elara.skills", "elara.tools"},
    "elara.voice": {"elara.audio", "elara.conversation", "elara.skills", "elara.brain"},
}


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_each_package_imports_only_the_layers_below_it():
    graph = import_graph()
    crossing = sorted(
        f"{name} → {target}" for name, targets in graph.items() if _package(name) in LAYERS
        for target in targets
        if target not in FOUNDATION and _package(target) != _package(name)
        and _package(target) not in LAYERS[_package(name)])
    assert not crossing, "imports across the layers:\n" + "\n".join(crossing)


def test_the_foundation_imports_nothing_above_it():
    graph = import_graph()
    assert {name: graph[name] - FOUNDATION for name in FOUNDATION if graph[name] - FOUNDATION} == {}


def test_the_top_level_holds_only_settings_config_and_errors():
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top == {"__init__", "__main__", "settings", "config", "errors"}


#: A class past this many lines, or a function past `FUNCTION_LINES`, is two things.
CLASS_LINES = 400
FUNCTION_LINES = 60


def test_no_class_or_function_under_elara_is_two_things():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            limit = (CLASS_LINES if isinstance(node, ast.ClassDef)
                     else FUNCTION_LINES if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None)
            if limit is not None and (lines := node.end_lineno - node.lineno + 1) > limit:
                too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines (> {limit})")
    assert not too_long, "\n".join(too_long)
