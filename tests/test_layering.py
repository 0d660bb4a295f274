"""The layers of docs/architecture.md, read off the source: every import, at module level or inside a function,
of every file of a lower layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EDGES = {"workers", "api", "evaluation", "devstack"}

# (files of a layer, the top-level packages that layer may not import)
LAYERS = [
    ("pipeline", EDGES | {"hindsight"}),
    ("schemas", EDGES | {"hindsight", "pipeline"}),
    ("hindsight", EDGES),
    ("workers", {"api", "evaluation", "devstack"}),
    ("api", {"evaluation", "devstack"}),
]
EDGE_FILES = {Path("hindsight/cli.py")}
"""The CLI is an edge inside the package: it imports devstack/evaluation inside the commands that need them."""


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """Top-level package of every absolute import in the file, with its line."""
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name.split(".")[0], node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
    return found


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import os\n\ndef f():\n    from workers.publisher import CeleryPublisher\n")
    assert imported_packages(source) == {("os", 1), ("workers", 4)}


@pytest.mark.parametrize(("layer", "forbidden"), LAYERS, ids=[layer for layer, _ in LAYERS])
def test_a_layer_imports_nothing_above_it(layer: str, forbidden: set[str]) -> None:
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files, f"no source under {layer}/"
    breaches = [
        f"{path.relative_to(ROOT)}:{line} imports {package}"
        for path in files
        if path.relative_to(ROOT) not in EDGE_FILES
        for package, line in sorted(imported_packages(path))
        if package in forbidden
    ]
    assert not breaches, "\n".join(breaches)
