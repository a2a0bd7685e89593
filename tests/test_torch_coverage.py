"""docs/torch-ops.md (the table of emulated and native ops) against the registry; one implementation
per op; the strict error pointing at the table."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import softfloat16.torch as sft  # noqa: E402
from softfloat16.torch import coverage, division, registry  # noqa: E402
from softfloat16.torch.__main__ import main  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / coverage.TABLE_PATH
aten = torch.ops.aten
# Implementations without a docstring, so without a semantics line in the table: add one, then
# remove the name here (the test fails both ways).
UNDOCUMENTED: set[str] = set()


def _listed(text: str, section: str) -> set[str]:
    """The op names a section of the page lists (backquoted, in table rows' first cells or in the list)."""
    part = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    if section.startswith("Emulated"):
        cells = [line.split("|")[1] for line in part.splitlines() if line.startswith("| `")]
        return {name for cell in cells for name in re.findall(r"`([^`]+)`", cell)}
    return set(re.findall(r"`([A-Za-z0-9_]+)`", part.split("\n\n", 2)[2]))


def test_the_committed_table_is_the_registrys():
    text = TABLE.read_text(encoding="utf-8")
    implemented = {packet.__name__ for packet in registry.IMPLEMENTATIONS}
    native = {packet.__name__ for packet in registry.NATIVE}
    listed, listed_native = _listed(text, "Emulated"), _listed(text, "Native")
    how = f"regenerate it: {coverage.COMMAND}"
    assert implemented - listed == set(), f"{coverage.TABLE_PATH} lacks emulated ops; {how}"
    assert listed - implemented == set(), f"{coverage.TABLE_PATH} lists ops the registry does not implement; {how}"
    assert native ^ listed_native == set(), f"{coverage.TABLE_PATH}: the native ops differ; {how}"
    assert text == coverage.table(), f"{coverage.TABLE_PATH} is out of date; {how}"


def test_the_table_names_each_op_once_with_its_family_and_semantics():
    rows = coverage.rows()
    names = [name for ops, _, _ in rows for name in ops]
    assert len(names) == len(set(names)) == len(registry.IMPLEMENTATIONS)
    by_op = {name: (family, text) for ops, family, text in rows for name in ops}
    assert by_op["native_layer_norm"][0] == "normalization"
    assert by_op["add_"] == by_op["add"] and by_op["add"][0] == "elementwise"
    assert by_op["div"][0] == "division" and by_op["div"][1].startswith("True division")
    assert by_op["_softmax"][1].startswith("`e_j / sum(e)`")
    assert "\n" not in "".join(text for _, _, text in rows)


def test_every_implementation_has_a_semantics_line():
    assert set(coverage.undocumented()) == UNDOCUMENTED


def test_implemented_and_native_are_disjoint():
    both = {packet.__name__ for packet in registry.IMPLEMENTATIONS} & {packet.__name__ for packet in registry.NATIVE}
    assert both == set()


def test_a_second_implementation_of_an_op_is_refused_at_registration():
    before = dict(registry.IMPLEMENTATIONS)

    def another_sqrt(machine, func, args, kwargs):
        raise AssertionError("never called")

    with pytest.raises(RuntimeError, match=r"aten\.sqrt is implemented twice: by softfloat16\.torch\.elementwise\.sqrt "
                                           r"and by .*another_sqrt"):
        registry.implements("sqrt")(another_sqrt)
    # An in-place form counts too, and a refused registration registers nothing of its other names.
    with pytest.raises(RuntimeError, match=r"aten\.mul_ is implemented twice"):
        registry.implements("logaddexp2", "mul_", inplace=False)(another_sqrt)
    with pytest.raises(RuntimeError, match=r"aten\.i0_? is implemented twice"):  # i0_ named, and i0's in-place form
        registry.implements("i0", "i0_")(another_sqrt)
    assert registry.IMPLEMENTATIONS == before


def test_div_has_one_implementation_and_true_division_is_kept():
    assert registry.IMPLEMENTATIONS[aten.div] is division.div
    assert registry.IMPLEMENTATIONS[aten.div_].__wrapped__ is division.div
    x = torch.tensor([1.0, 2.0, -7.0, 65504.0], dtype=torch.float16)
    y = torch.tensor([3.0, 3.0, 2.0, 0.5], dtype=torch.float16)
    with sft.emulate(rounding="rtz") as mode:
        quotient, floored = x / y, torch.div(x, y, rounding_mode="floor")
        z = x.clone()
        z /= y
    assert not mode.fallbacks
    # 1/3 and 2/3 truncated to FP16 (1365 * 2**-12, 1365 * 2**-11), -3.5, and 65504 / 0.5 = 131008
    # truncated to the largest finite FP16 (rtz does not overflow); floor: floor(-3.5) = -4.
    assert quotient.tolist() == [0.333251953125, 0.66650390625, -3.5, 65504.0]
    assert torch.equal(z, quotient)
    assert floored.tolist() == [0.0, 0.0, -4.0, 65504.0]


def test_the_strict_error_says_where_the_table_is(monkeypatch):
    monkeypatch.delitem(registry.IMPLEMENTATIONS, aten.sqrt)
    with sft.emulate(strict=True), pytest.raises(sft.NotEmulatedError, match=r"aten\.sqrt\.default is not emulated"
                                                 r".*docs/torch-ops\.md lists the ops emulated"):
        torch.sqrt(torch.ones(2, dtype=torch.float16))


def test_ops_command_prints_writes_and_checks(tmp_path, capsys):
    assert main(["ops"]) == 0
    assert capsys.readouterr().out == coverage.table()
    page = tmp_path / "ops.md"
    assert main(["ops", "--write", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == coverage.table()
    capsys.readouterr()
    assert main(["ops", "--check", str(page)]) == 0
    page.write_text(coverage.table().replace("| `abs`", "| `abs_not`"), encoding="utf-8")
    assert main(["ops", "--check", str(page)]) == 1
    assert coverage.COMMAND in capsys.readouterr().out
    assert main(["ops", "--check", str(tmp_path / "missing.md")]) == 1
    with pytest.raises(SystemExit):
        main(["ops", "--write", str(page), "--check", str(page)])
