"""The shape of ``sim``: no module over 600 lines, the report's three stories with the same parts,
and every recipe key spelt once (in :mod:`sim.report.keys`)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sim.config import ACCUMULATIONS, PRECISIONS
from sim.report import keys

SIM = Path(__file__).resolve().parents[2] / "sim"
MAX_LINES = 600
PARTS = ("recipes", "runs", "claims", "figures", "markdown")


@pytest.mark.parametrize("path", sorted(SIM.rglob("*.py")), ids=lambda path: str(path.relative_to(SIM.parent)))
def test_no_module_is_over_600_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_the_stories_have_the_same_parts():
    """A story is a package with one module per part, or one module with a section per part."""
    report = SIM / "report"
    for story in ("scaling", "finer"):
        assert sorted(p.stem for p in (report / story).glob("*.py")) == sorted([*PARTS, "__init__"]), story
    headers = [line for line in (report / "sweep.py").read_text().splitlines() if line.startswith("# --- ")]
    assert [header.split()[2].rstrip(":") for header in headers] == list(PARTS)
    assert not (SIM / "figures.py").exists() and not list(SIM.glob("figures_*.py"))  # figures live in the report


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """(line, value) of every string constant of a module, docstrings and f-string parts left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and id(node) not in in_fstrings]


def test_recipe_keys_are_spelt_once():
    """Outside sim/report/keys.py no module of the report writes a recipe key as a literal. Keys
    that are also a precision or an accumulation name ("fp32", "mxfp8") cannot be told apart from
    those in the source and are left out of the check."""
    spelt = {value for name, value in vars(keys).items() if name.isupper() and isinstance(value, str)}
    assert keys.SUITE_KEYS and keys.FINER_KEYS and spelt >= set(keys.SUITE_KEYS) | set(keys.FINER_KEYS)
    checked = spelt - set(PRECISIONS) - set(ACCUMULATIONS)
    found = [f"{path.relative_to(SIM.parent)}:{line}: {value!r}"
             for path in sorted((SIM / "report").rglob("*.py")) if path.name != "keys.py"
             for line, value in _string_constants(path) if value in checked]
    assert not found, "recipe keys written out instead of taken from sim.report.keys:\n" + "\n".join(found)


def test_each_storys_keys_are_its_recipes_keys_in_order():
    from sim.report import sweep
    from sim.report.finer.recipes import finer_recipes
    from sim.report.scaling.recipes import suite_recipes

    assert [recipe.key for recipe in suite_recipes()] == list(keys.SUITE_KEYS)
    assert [recipe.key for recipe in finer_recipes()] == list(keys.FINER_KEYS)
    assert [key for key, _ in sweep.SWEEP_RUNS] == [keys.FP32, keys.FP16_NONE, keys.FP16_DYNAMIC]
