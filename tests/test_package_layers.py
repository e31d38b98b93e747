"""The layout is the architecture: no package imports one above it (docs/architecture.md)."""
import ast
from pathlib import Path

STIR = Path(__file__).resolve().parents[1] / "stir"

# Layer of each top-level package or module of stir (docs/architecture.md).
LAYER = {
    "similarity": 1, "descent": 1, "atomic": 1, "untrusted": 1, "provenance": 1, "config": 1, "allocator": 1, "cli": 1, "progress": 1,
    "paper": 1,
    "models": 2, "data": 2,
    "attacks": 3, "inversion": 3, "training": 3, "store": 3,
    "measure": 4, "judging": 4, "stitching": 4, "invariance": 4,
    "zoo": 5, "reporting": 5,
    "experiments": 6,
    "__init__": 7,  # the package's lazy re-exports
    "__main__": 7,  # python -m stir: the install check
}
# Imports that cross upwards on purpose, each with its reason.
ALLOWED = {
    ("config", "models"): "validate_train checks model.arch against the registry, imported inside the function",
}


def imports(path: Path):
    """Every stir subpackage a module imports (at top level or inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "stir" and len(parts) > 1:
                yield parts[1]


def test_no_package_imports_one_above_it():
    wrong = []
    for path in sorted(STIR.rglob("*.py")):
        rel = path.relative_to(STIR)
        package = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        assert package in LAYER, f"{rel}: add its package to LAYER (and to docs/architecture.md)"
        for imported in imports(path):
            if imported not in LAYER:
                wrong.append(f"{rel} imports unknown stir.{imported}")
            elif LAYER[imported] > LAYER[package] and (package, imported) not in ALLOWED:
                wrong.append(f"{rel} (layer {LAYER[package]}) imports stir.{imported} (layer {LAYER[imported]})")
    assert not wrong, "\n".join(wrong)


def test_reporting_renders_plain_data():
    """reporting knows no measurement, model or experiment type: it writes what it is handed."""
    for path in (STIR / "reporting").rglob("*.py"):
        assert not set(imports(path)) & {"measure", "zoo", "experiments", "inversion", "models"}, path
