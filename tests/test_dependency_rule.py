"""The dependency rule (DESIGN.md, Layout), read from every module's imports (ast): the engine
never imports attacks, defenses or reports; reports never imports the engine, attacks or defenses."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMPOSITION_ROOT = ("fltr_audit/cli/", "fltr_audit/campaign.py", "fltr_audit/campaign_spec.py",
                    "fltr_audit/campaign_grid.py", "fltr_audit/executors.py", "fltr_audit/audit_run.py", "fltr_audit/api.py",
                    "fltr_audit/plugins.py", "fltr_audit/flower/")
"""The modules of ``fltr_audit`` that wire the packages together and may import all of them."""


def imported_packages(path: Path) -> set[str]:
    """Top-level packages ``path`` imports anywhere (module level or inside functions)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


ENGINE = [p for p in modules("fltr_audit") if not _rel(p).startswith(COMPOSITION_ROOT)]


def test_the_scan_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os.path\n\ndef f():\n    from attacks.registry import make_attack\n")
    assert imported_packages(module) == {"os", "attacks"}


@pytest.mark.parametrize("path", ENGINE, ids=_rel)
def test_engine_never_imports_attacks_defenses_or_reports(path):
    assert not imported_packages(path) & {"attacks", "defenses", "reports"}


@pytest.mark.parametrize("path", [p for p in modules("fltr_audit") + modules("attacks") + modules("defenses")
                                  + modules("reports") if not _rel(p).startswith("fltr_audit/flower/")], ids=_rel)
def test_only_the_flower_integration_imports_flwr(path):
    """flwr is an optional extra: everything but ``fltr_audit/flower/`` works without it."""
    assert "flwr" not in imported_packages(path)


def test_the_flower_integration_is_composition_root():
    """It imports ``defenses`` (DefenseMod's defenses) and ``flwr``; the engine imports neither it nor them."""
    flower = [p for p in modules("fltr_audit") if _rel(p).startswith("fltr_audit/flower/")]
    assert flower and not set(ENGINE) & set(flower)
    assert any("flwr" in imported_packages(p) for p in flower)


@pytest.mark.parametrize("path", modules("reports"), ids=_rel)
def test_reports_never_import_the_engine(path):
    assert not imported_packages(path) & {"fltr_audit", "attacks", "defenses"}
