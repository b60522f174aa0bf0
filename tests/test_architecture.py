"""The package's import direction (ARCHITECTURE.md): every module imports only from lower
layers, or from its own package; the scripts outside the package hold no logic."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "keras_transformer"
# Lower rank = lower layer. Siblings (same rank, different package) may not import each other.
RANKS = {
    "checks": 0,
    "constants": 0,
    "logging_utils": 0,
    "malloc": 0,
    "onednn": 0,
    "tracing": 0,  # graph_function: tf.function without AutoGraph
    "precision": 0.5,  # the training dtype rule: plain Python, reads onednn
    "config": 1,
    "recipes": 1.5,  # jobs resolved for a machine: config's values, plain Python
    "layers": 2,
    "model": 3,
    "data": 4,
    "artifacts": 5,
    "training": 6,
    "decoding": 6,
    "serving": 7,
    "runner": 8,  # a training run end to end: trains, evaluates, exports
    "cli": 9,
    "testing": 10,
}


# Known debts: none. Strict: a new upward import or a script with logic fails, and an entry
# here that is not (or no longer) a debt fails too.
KNOWN_UPWARD: dict[str, set[str]] = {}
KNOWN_FAT_SCRIPTS: set[str] = set()


def _unit(module: str) -> str:
    """`keras_transformer.decoding.translator` -> "decoding"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return [name for name in found if name.startswith("keras_transformer.")]


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).with_suffix("")
        yield ".".join(relative.parts), path


def test_every_package_has_a_rank():
    units = {_unit(module) for module, _ in _modules()} - {"__init__", ""}
    assert units <= set(RANKS), sorted(units - set(RANKS))


def test_architecture_md_draws_the_same_layers():
    """ARCHITECTURE.md's diagram names every unit in the order of `RANKS`."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    diagram = text.split("```")[1]
    words = re.findall(r"[a-z_]+", diagram.split("(testing")[0])
    drawn = [word for word in words if word in RANKS]
    assert set(drawn) == set(RANKS) - {"testing"}, sorted(set(RANKS) - set(drawn))
    ranks = [RANKS[word] for word in drawn]
    assert ranks == sorted(ranks), drawn
    assert "(testing" in diagram


@pytest.mark.parametrize("module, path", list(_modules()), ids=lambda v: str(v))
def test_imports_point_downward(module, path):
    unit = _unit(module)
    if unit in ("", "__init__"):
        return  # the package's own __init__ re-exports the public API
    wrong = set()
    for name in _imports(path):
        target = _unit(name)
        if target not in RANKS or target == unit:
            continue
        if RANKS[target] >= RANKS[unit]:
            wrong.add(f"keras_transformer.{target}")
    assert wrong == KNOWN_UPWARD.get(module, set()), f"{module} imports upward or sideways"


@pytest.mark.parametrize("folder", ["pipelines", "export"])
def test_scripts_are_thin(folder):
    fat = set()
    for path in sorted((ROOT / folder).glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        text = path.read_text(encoding="utf-8")
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        if defs or "sys.path" in text or "importlib" in text:
            fat.add(path.name)  # logic belongs in keras_transformer.cli
    assert fat == (KNOWN_FAT_SCRIPTS if folder == "pipelines" else set())
