"""The table of the ops the mode emulates (``registry.IMPLEMENTATIONS``) and of those it lets torch
run (``registry.NATIVE``): docs/torch-ops.md, written from the registry by

    python -m softfloat16.torch ops --write docs/torch-ops.md

Each emulated op gets its family (the module implementing it: ``elementwise``, ``activations``,
``normalization``...) and its semantics: the first sentence of the implementing function's
docstring. An in-place form computed by the functional op (``add_`` by ``add``) shares its row.
tests/test_torch_coverage.py fails when the committed table and the registry disagree.
"""
from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

from .registry import IMPLEMENTATIONS, NATIVE

__all__ = ["COMMAND", "TABLE_PATH", "family", "rows", "semantics", "table", "undocumented"]

TABLE_PATH = "docs/torch-ops.md"
COMMAND = f"python -m softfloat16.torch ops --write {TABLE_PATH}"


def _implementing(function):
    """The function an entry of IMPLEMENTATIONS runs (an in-place wrapper's functional op)."""
    return getattr(function, "__wrapped__", function)


def family(function) -> str:
    """The family of an implementation: its module's name, words spaced.

    >>> from softfloat16.torch import registry
    >>> family(registry.IMPLEMENTATIONS[registry.aten.native_layer_norm])
    'normalization'
    """
    return _implementing(function).__module__.rsplit(".", 1)[-1].replace("_", " ")


def _first_sentence(text: str, shortest: int = 30) -> str:
    """Up to the first full stop followed by a space and a capital, a digit or a backquote, outside
    brackets; the next sentences too while shorter than ``shortest`` characters (a bare formula)."""
    depth = 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char == "." and depth == 0 and index + 1 >= shortest and re.match(r"\.\s+[A-Z0-9`]",
                                                                               text[index:index + 3]):
            return text[:index + 1]
    return text


def semantics(function) -> str:
    """The first sentence of the implementing function's docstring, as one Markdown line ("" if
    it has none).

    >>> from softfloat16.torch import registry
    >>> semantics(registry.IMPLEMENTATIONS[registry.aten.sqrt_])
    'Square root in FP32, rounded once into the format (correctly rounded).'
    """
    doc = inspect.getdoc(_implementing(function)) or ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    sentence = _first_sentence(paragraph)
    sentence = re.sub(r":(?:func|class|meth|mod|attr):`~?([^`]+)`", r"``\1``", sentence)
    return sentence.replace("``", "`").replace("|", "\\|")


def undocumented() -> list[str]:
    """The implementing functions without a docstring (module.name), sorted."""
    found = {_implementing(f) for f in IMPLEMENTATIONS.values() if not semantics(f)}
    return sorted(f"{f.__module__}.{f.__qualname__}" for f in found)


def rows() -> list[tuple[tuple[str, ...], str, str]]:
    """(op names, family, semantics) per implementing function (``mm``, ``bmm``, ``mv``, ``dot``
    share one; an in-place ``add_`` shares ``add``'s), sorted by family, then by first op name."""
    grouped: dict = {}
    for packet, function in IMPLEMENTATIONS.items():
        grouped.setdefault(_implementing(function), []).append(packet.__name__)
    found = [(tuple(sorted(names)), family(function), semantics(function)) for function, names in grouped.items()]
    return sorted(found, key=lambda row: (row[1], row[0]))


def _wrap(words: list[str], width: int = 110) -> list[str]:
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line else lines


def table() -> str:
    """docs/torch-ops.md as the registry makes it."""
    entries = rows()
    families: dict[str, int] = {}
    for names, name, _ in entries:
        families[name] = families.get(name, 0) + len(names)
    native = sorted(packet.__name__ for packet in NATIVE)
    lines = [
        "# The aten ops of `softfloat16.torch.emulate`",
        "",
        f"Generated from `softfloat16/torch/registry.py` by `{COMMAND}`: do not edit by hand;",
        "`tests/test_torch_coverage.py` fails when this page and the registry disagree. docs/torch.md describes",
        "the semantics in full and the measured differences from native torch.",
        "",
        "An op in neither list is not emulated: under `emulate(strict=True)` it raises `NotEmulatedError`",
        "naming it, with `strict=False` it runs natively in torch and is counted in `mode.fallbacks`.",
        "Each op covers all its overloads (`aten.add.Tensor`, `aten.add.Scalar`, ...) and their `out=` forms.",
        "",
        f"## Emulated: {sum(families.values())} ops",
        "",
        "Ops by family (the module of `softfloat16/torch/` computing them): "
        + ", ".join(f"{name} {count}" for name, count in sorted(families.items())) + ".",
        "One row per implementing function: its ops, its family, and the first sentence of its docstring.",
        "",
        "| op (aten) | family | semantics |",
        "|---|---|---|",
    ]
    lines += [f"| {', '.join(f'`{n}`' for n in names)} | {name} | {text} |" for names, name, text in entries]
    lines += [
        "",
        f"## Native: {len(native)} ops",
        "",
        "Data movement, creation of exact values, random number generation and exact predicates: they",
        "round nothing, torch runs them on the bits the emulator would produce.",
        "",
        *_wrap([f"`{name}`" for name in native]),
        "",
    ]
    return "\n".join(lines)


def add_command(commands) -> None:
    """The ``ops`` subcommand of ``python -m softfloat16.torch``."""
    ops = commands.add_parser("ops", help="the table of emulated and native aten ops",
                              description=f"Print the table of the ops the mode emulates and runs natively "
                              f"(Markdown); `{COMMAND}` rewrites the committed page.")
    where = ops.add_mutually_exclusive_group()
    where.add_argument("--write", metavar="FILE", type=Path, help="write the table into FILE instead of printing it")
    where.add_argument("--check", metavar="FILE", type=Path,
                       help="exit 1 (naming the command that rewrites it) if FILE differs from the table")


def run(args: argparse.Namespace) -> int:
    """Run ``ops``; returns the exit status."""
    text = table()
    if args.write is not None:
        args.write.write_text(text, encoding="utf-8")
        print(f"{args.write}: {len(IMPLEMENTATIONS)} emulated ops, {len(NATIVE)} native ops")
        return 0
    if args.check is not None:
        try:
            current = args.check.read_text(encoding="utf-8")
        except OSError as error:
            print(f"{args.check}: cannot read it ({error.strerror}); write it with: {COMMAND}")
            return 1
        if current != text:
            print(f"{args.check} differs from the registry; rewrite it with: {COMMAND}")
            return 1
        print(f"{args.check} matches the registry")
        return 0
    print(text, end="")
    return 0
