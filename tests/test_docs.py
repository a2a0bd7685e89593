"""Every code example of the README and of docs/ runs, so that a page cannot rot.

- ``>>>`` blocks are doctests: pytest collects every ``*.md`` of ``docs/`` and the README
  (pyproject: ``--doctest-glob=*.md``, ``README.md`` in ``testpaths``).
- Plain ``python`` blocks are executed here, page by page in one namespace; test functions a
  page defines as a template for users are called.
- Every ``python -m ...`` command of a shell block (or a ``$ `` line) is parsed by that command's
  own parser, so a renamed or removed flag fails here. The quick ones (``python -m softfloat16``
  explain and op) also run, and each output line the page shows must be in what they print.
  ``python FILE`` and ``bash FILE`` commands must name a file of the repository.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

import softfloat16 as sf

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
# Names a page's user template expects the user to supply.
PAGE_CONTEXT = {"verification.md": {"my_fp16_mul": sf.fp16.mul}}


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def blocks(page: Path) -> list[tuple[str, str]]:
    """(language, code) of each fenced block of a page."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


def commands(page: Path) -> list[tuple[str, list[str]]]:
    """(command line, lines the page shows as its output) for each shell command of a page."""
    found = []
    for language, code in blocks(page):
        lines = code.replace("\\\n", " ").splitlines()
        if language in ("bash", "sh"):
            for line in lines:
                line = line.split(" #")[0].strip()
                found += [(part.strip(), []) for part in line.split("&&") if part.strip()]
        elif language == "":
            for index, line in enumerate(lines):
                if line.startswith("$ "):
                    output = []
                    for after in lines[index + 1:]:
                        if after.startswith("$ "):
                            break
                        output.append(after)
                    found.append((line[2:].strip(), output))
    return found


def python_pages() -> list[Path]:
    return [p for p in PAGES if any(lang == "python" and ">>>" not in code for lang, code in blocks(p))]


def command_cases() -> list:
    return [pytest.param(page, line, output, id=f"{_name(page)}: {line[:60]}")
            for page in PAGES for line, output in commands(page)]


def test_pages_are_found():
    names = {_name(p) for p in PAGES}
    assert {"README.md", "docs/sim.md", "docs/softfloat16.md", "docs/cli.md"} <= names
    assert python_pages(), "no plain python block found: the extraction is broken"
    assert len(command_cases()) > 10


@pytest.mark.parametrize("page", python_pages(), ids=_name)
def test_python_blocks_run(page: Path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples may write files
    namespace = {"__name__": "doc_example", **PAGE_CONTEXT.get(page.name, {})}
    for language, code in blocks(page):
        if language != "python" or ">>>" in code:
            continue
        if "TorchBackend" in code or re.search(r"^import torch\b", code, re.MULTILINE):
            pytest.importorskip("torch")
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"{_name(page)} (python block)", "exec"), namespace)
        for name, value in list(namespace.items()):
            if name.startswith("test_") and callable(value):
                value()  # a template test the page offers users, with the names it expects


def _parse(argv: list[str]):
    """Parse ``python -m MODULE ARGS``'s arguments with that command's parser (SystemExit on error)."""
    module, rest = argv[0], argv[1:]
    if module == "softfloat16":
        from softfloat16.__main__ import _parser

        return _parser().parse_args(rest)
    if module == "sim" and rest[:1] != ["crosscheck"]:
        from sim.cli import parse_arguments

        return parse_arguments(rest)
    if module == "softfloat16.torch":
        pytest.importorskip("torch")
        from softfloat16.torch.__main__ import _parser

        return _parser().parse_args(rest)
    if module in ("sim", "sim.crosscheck"):
        from sim.crosscheck.cli import _parser

        return _parser().parse_args(rest[1:] if module == "sim" else rest)
    raise AssertionError(f"a command of an unknown module: python -m {module}")


@pytest.mark.parametrize("page, line, shown", command_cases())
def test_shell_commands(page: Path, line: str, shown: list[str], capsys):
    argv = shlex.split(line)
    if argv[:1] == ["pip"] or "$" in line or argv[:1] == ["for"] or argv[:1] == ["done;"]:
        pytest.skip("installs or shell loops are not run here")
    if argv[:1] in (["python"], ["bash"]) and argv[1] != "-m":
        assert (ROOT / argv[1]).is_file(), f"{_name(page)} runs {argv[1]}, which does not exist"
        return
    if argv[:2] != ["python", "-m"] or argv[2] in ("pytest", "pip"):
        pytest.skip(f"not a command of this project: {line}")
    try:
        _parse(argv[2:])
    except SystemExit as error:
        raise AssertionError(f"{_name(page)}: `{line}` does not parse: {capsys.readouterr().err}") from error
    if argv[2] == "softfloat16" and argv[3] in ("explain", "op"):
        from softfloat16.__main__ import main

        capsys.readouterr()
        assert main(argv[3:]) == 0
        printed = [row.rstrip() for row in capsys.readouterr().out.splitlines()]
        for row in shown:
            if row.strip() and row.strip() != "...":
                assert row.rstrip() in printed, f"{_name(page)}: `{line}` no longer prints {row!r}"


def test_the_readme_says_what_the_test_command_installs_and_how_to_avoid_the_cuda_build():
    """A new user got 3 GB of CUDA wheels from the test command without a word of warning."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    test_command = 'pip install -c constraints.txt -e ".[dev,crosscheck,dask]" && python -m pytest -q -n auto'
    cpu_first = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    assert test_command in readme and cpu_first in readme
    section = readme[readme.index("Run the tests"):readme.index("## A 30-second tour")]
    assert "3 GB" in section and "CPU build" in section and "crosscheck" in section
    # CI runs the README's command verbatim, after installing a CPU build that satisfies the extra.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci and ci.index("-c constraints.txt torch") < ci.index(test_command)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'crosscheck = \["torch>=[0-9.]+"', pyproject)  # torch's range, before mmasim's
    assert "mmasim" in section and "g++" in section
