"""constraints.txt (the versions CI installs) and .ci/pins.py, which writes and compares it."""
import importlib.util
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("pins", ROOT / ".ci" / "pins.py")
pins = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pins)


def declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = project["dependencies"] + [r for extra in pins.EXTRAS for r in project["optional-dependencies"][extra]]
    return [Requirement(line) for line in lines]


def test_every_declared_dependency_is_pinned_inside_its_declared_range():
    pinned = pins.read_pins()
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} is declared in pyproject.toml but not pinned in constraints.txt"
        assert req.specifier.contains(pinned[name], prereleases=True), (req, pinned[name])


def test_ci_and_the_readme_install_with_the_pins():
    command = 'pip install -c constraints.txt -e ".[dev,crosscheck,dask]" && python -m pytest -q -n auto'
    assert command in (ROOT / ".ci" / "run").read_text()
    assert command in (ROOT / "README.md").read_text()


def test_diff_names_each_package_off_its_pin(tmp_path):
    installed = pins.requirement_closure()
    assert {"numpy", "numba", "hypothesis", "pytest"} <= set(installed)
    file = tmp_path / "constraints.txt"
    wrong = {**{name: pins.public(v) for name, v in installed.items()}, "numpy": "0.0.1", "not-a-package": "1.0"}
    del wrong["numba"]
    file.write_text("# comment\n" + "".join(f"{n}=={v}\n" for n, v in sorted(wrong.items())))
    assert sorted(pins.diff(file)) == [
        "not-a-package: pinned 1.0, not required here",
        f"numba: {installed['numba']} installed, not pinned",
        f"numpy: pinned 0.0.1, installed {installed['numpy']}",
    ]


def test_write_then_diff_is_empty(tmp_path):
    file = tmp_path / "constraints.txt"
    pins.write(file)
    assert pins.diff(file) == []
    assert not any("+" in line for line in file.read_text().splitlines())  # local labels dropped


def test_a_malformed_pin_is_one_line_naming_the_file_and_line(tmp_path):
    file = tmp_path / "constraints.txt"
    file.write_text("numpy==2.0\nnumba>=0.60\n")
    with pytest.raises(SystemExit, match=r"constraints\.txt line 2: expected name==version, got 'numba>=0\.60'"):
        pins.read_pins(file)


def test_lowest_lists_each_declared_lower_bound():
    lowest = pins.lowest()
    assert "numba==0.59" in lowest and "numpy==1.24" in lowest
    assert len(lowest) == len({canonicalize_name(r.name) for r in declared()})
