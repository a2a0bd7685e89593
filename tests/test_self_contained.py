"""The repository speaks for itself: docs, code and tests cite nothing outside it and describe
what the software does, install hints work from a checkout, bench/gpu_check.sh says what it
needs, and the contributor's map (docs/design.md) names modules that exist.

Each file of the checkout (tracked, or new and not ignored) is read as text; binary files and this
file, which has to spell out what it forbids, are left out.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve()

# What a file must not say: pointers to files that are not in the repository, to an issue tracker,
# and words about how the project was made rather than what it does.
FORBIDDEN = {
    "a design file outside the repository": re.compile(r"\bDESIGN\.md\b"),
    "a developers' file outside the repository": re.compile(r"\bDEVELOPERS\.md\b"),
    "a folder outside the repository": re.compile(r"\.\./shared\b"),
    "an issue number": re.compile(r"\bissues?\s*#?\d+|(?<![\w&#/])#\d{1,3}\b(?![\w-])", re.IGNORECASE),
    "an issue as a source": re.compile(r"\(issue:|\bthe (?:sim )?issue\b|/issues/", re.IGNORECASE),
    "how a machine was lent": re.compile(r"\blent\b", re.IGNORECASE),
    "who wrote it": re.compile(r"\b(?:this|that|a|the|another|helper|founding) session\b|\bfounding\b",
                               re.IGNORECASE),
    "design notes outside the repository": re.compile(r"\bdesign notes\b", re.IGNORECASE),
}
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ""}


def checkout_files(include_this: bool = False) -> list[Path]:
    """The text files of the checkout: tracked or new (not ignored) per git, else every file under the root."""
    git = shutil.which("git")
    if git and (ROOT / ".git").exists():
        listed = subprocess.run([git, "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                                capture_output=True, check=True).stdout.decode().split("\0")
        paths = [ROOT / name for name in listed if name]
    else:  # an unpacked source tree without git
        skip = {".git", ".venv", "venv", "__pycache__", "build", "dist", ".hypothesis"}
        paths = [p for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in paths
                  if p.is_file() and p.suffix in TEXT_SUFFIXES and (include_this or p.resolve() != THIS))


def read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def findings(pattern: re.Pattern, files: list[Path]) -> list[str]:
    found = []
    for path in files:
        text = read(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    return found


def test_the_checkout_is_found():
    names = {str(p.relative_to(ROOT)) for p in checkout_files()}
    assert {"README.md", "docs/design.md", "docs/gpu.md", "bench/gpu_check.sh", "softfloat16/ops.py"} <= names


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_nothing_points_outside_the_repository_or_at_how_it_was_made(what):
    found = findings(FORBIDDEN[what], checkout_files())
    assert not found, f"{what}: state the fact itself, or point at a page of docs/:\n" + "\n".join(found)


@pytest.mark.parametrize("line, bad", [
    ("see DESIGN.md for why", "a design file outside the repository"),
    ("(DEVELOPERS.md: determinism)", "a developers' file outside the repository"),
    ("cat ../shared/notes", "a folder outside the repository"),
    ("# --- the formats of issue 10 ---", "an issue number"),
    ("Against issue #15's targets", "an issue number"),
    ("after the #12 refactor", "an issue number"),
    ("(issue: work thrown away)", "an issue as a source"),
    ("(CPU; CUDA when a GPU is lent)", "how a machine was lent"),
    ("No GPU was available to the session that wrote this", "who wrote it"),
    ("those recorded in the project's design notes", "design notes outside the repository"),
])
def test_the_patterns_catch_what_they_are_for(line, bad):
    assert FORBIDDEN[bad].search(line)


@pytest.mark.parametrize("line", [
    'RUN_COLORS = ("#000000", "#d62728")', "see [FP8](#fp8---precision-fp8)", "computed once per test session",
    "docs/design.md: the layers", "silent", "equivalent", "the tensor-core issue rate",
])
def test_the_patterns_leave_ordinary_text_alone(line):
    assert not [name for name, pattern in FORBIDDEN.items() if pattern.search(line)]


# --- install hints ------------------------------------------------------------------------------
# Every `pip install` of this project's extras, as written in a doc, a message or a comment.
EXTRA_HINT = re.compile(
    r"pip install(?P<args>[^\n`]*?)(?P<quote>\\?['\"]?)(?P<target>[\w.\-/]*)\[(?P<extras>[\w,\s]+)\]")
EDITABLE = re.compile(r"(?:^|\s)-e\s+$")  # the options end with -e: an editable install of what follows


def install_hints(text: str) -> list[re.Match]:
    return list(EXTRA_HINT.finditer(text))


def bad_hint(match: re.Match) -> bool:
    """A hint pip cannot follow from a checkout: anything but ``pip install [OPTIONS] -e ".[extra]"``."""
    return match.group("target") != "." or not EDITABLE.search(match.group("args"))


def test_install_hints_use_the_checkout_form():
    """No index has a package named softfloat16: ``pip install 'softfloat16[crosscheck]'`` fails.
    What works is an editable install of the checkout: ``pip install -e ".[crosscheck]"``."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = pyproject[pyproject.index("[project.optional-dependencies]"):]
    section = section[:section.index("\n[", 1)]
    declared = set(re.findall(r"^(\w+)\s*=", section, re.MULTILINE))
    hints, bad, unknown = 0, [], []
    for path in checkout_files():
        text = read(path)
        for match in install_hints(text or ""):
            hints += 1
            where = f"{path.relative_to(ROOT)}: {match.group(0)}"
            if bad_hint(match):
                bad.append(where)
            unknown += [f"{where} (extra {extra!r})" for extra in re.split(r"[,\s]+", match.group("extras").strip())
                        if extra not in declared]
    assert hints >= 5, "no install hint found: the search is broken"
    assert not bad, 'install hints that do not work from a checkout (write pip install -e ".[extra]"):\n' + \
        "\n".join(bad)
    assert not unknown, "install hints naming an extra pyproject.toml does not declare:\n" + "\n".join(unknown)


@pytest.mark.parametrize("text, bad", [
    ("install it with: pip install 'softfloat16[crosscheck]'", True),
    ("pip install softfloat16[dask]", True),
    ("pip install '.[report]'", True),
    ('pip install -e ".[crosscheck]"', False),
    ("pip install -e '.[report]'", False),
    ('pip install -c constraints.txt -e ".[dev,crosscheck,dask]"', False),
    ('pip install --quiet --upgrade -e ".[dev]"', False),
    ('echo "pip install -e \\".[crosscheck]\\""', False),
    ("pip install -e softfloat16[dask]", True),
])
def test_the_hint_check_tells_the_forms_apart(text, bad):
    [match] = install_hints(text)
    assert bad_hint(match) is bad


# --- bench/gpu_check.sh ---------------------------------------------------------------------------
GPU_CHECK = ROOT / "bench" / "gpu_check.sh"


def _stub(folder: Path, module: str) -> None:
    message = f"No module named {module!r}"
    (folder / f"{module}.py").write_text(f"raise ModuleNotFoundError({message!r}, name={module!r})\n")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_check_names_a_missing_requirement_in_one_line_and_writes_nothing(tmp_path):
    """On a machine with torch but no numpy the script used to fail with a traceback and the
    "no GPU" status. Now: one line naming what is missing and how to install it, exit status 3,
    and no output folder."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    _stub(stubs, "numpy")  # import numpy fails, as where it is not installed
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(stubs), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(GPU_CHECK), str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and not done.stdout, done.stdout + done.stderr
    assert re.search(r"missing: .*\bnumpy\b", lines[0]) and 'pip install -e ".[crosscheck]"' in lines[0]
    assert "Traceback" not in done.stderr and not out.exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_check_without_a_python_says_so(tmp_path):
    env = {**os.environ, "PYTHON": str(tmp_path / "no-such-python")}
    done = subprocess.run(["bash", str(GPU_CHECK), str(tmp_path / "out")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no-such-python" in done.stderr and not (tmp_path / "out").exists()


def test_gpu_check_installs_nothing_and_documents_its_exit_statuses():
    script = GPU_CHECK.read_text(encoding="utf-8")
    commands = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in commands if re.search(r"-m pip\b|^\s*pip\b", line)]
    header = script[:script.index("set -uo pipefail")]
    for status in ("0 when", "1 otherwise", "2 without a GPU", "3 when a requirement is missing"):
        assert status in header
    assert "docs/gpu.md" in header


# --- one cross-machine recipe, one contributor's map ------------------------------------------------
def test_one_gpu_recipe_that_the_other_pages_link_to():
    recipe = (ROOT / "docs" / "gpu.md").read_text(encoding="utf-8")
    for command in ('pip install -e ".[crosscheck]"', "bash bench/gpu_check.sh gpu_check_out",
                    "python -m sim crosscheck --against gpu_check_out/cuda-exact-fp16.npz",
                    "python -m softfloat16.torch compare cuda-step.npz --replay",
                    "tests/sim/crosscheck/test_crosscheck_cuda_fixtures.py"):
        assert command in recipe, command
    for page in ("docs/crosscheck.md", "docs/torch.md"):
        assert "(gpu.md)" in (ROOT / page).read_text(encoding="utf-8"), page
    assert "docs/gpu.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_design_page_names_modules_and_functions_that_exist():
    page = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert "docs/design.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    files = {str(p.relative_to(ROOT)) for p in checkout_files(include_this=True)}
    named = set(re.findall(r"`([\w/]+\.py)(?:::(\w+))?", page))
    assert len(named) > 20, "the extraction is broken"
    missing, undefined = [], []
    for path, function in sorted(named):
        matches = [f for f in files if f == path or f.endswith("/" + path)]
        if not matches:
            missing.append(path)
        elif function and not any(re.search(rf"^(?:def|class) {function}\b|^{function} = ",
                                            (ROOT / f).read_text(encoding="utf-8"), re.MULTILINE) for f in matches):
            undefined.append(f"{path}::{function}")
    assert not missing, f"docs/design.md names files that do not exist: {missing}"
    assert not undefined, f"docs/design.md names functions that do not exist: {undefined}"
