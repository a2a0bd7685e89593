"""What every ``python -m sim`` command shares on its command line: value types whose errors say
what is wrong in the user's terms, the usage error, and output paths checked before any work.

A value type raises ``argparse.ArgumentTypeError``, so argparse reports
``argument --lr: must be a positive finite number, got 'abc'`` (a plain ValueError would make it
print the converter's function name instead).
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator

__all__ = [
    "UsageError", "check_output_dir", "check_writable", "momentum", "non_negative_float", "non_negative_int",
    "output_dir", "positive_float", "positive_int",
]


class UsageError(Exception):
    """A bad command line, or an output that cannot be written: reported as
    ``<command>: error: ...`` with exit status 2, before anything is computed."""


def _number(text: str, kind: Callable[[str], float], what: str) -> float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


def _integer(text: str, low: int, what: str) -> int:
    value = int(_number(text, int, what))
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def _real(text: str, low: float, what: str, *, open_low: bool) -> float:
    value = _number(text, float, what)
    if not (low < value < math.inf if open_low else low <= value < math.inf):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1.

    >>> positive_int("3")
    3
    """
    return _integer(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return _integer(text, 0, "a non-negative integer")


def positive_float(text: str) -> float:
    """A finite number > 0.

    >>> positive_float("abc")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be a positive finite number, got 'abc'
    """
    return _real(text, 0.0, "a positive finite number", open_low=True)


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    return _real(text, 0.0, "a non-negative finite number", open_low=False)


def momentum(text: str) -> float:
    """SGD momentum: 0 <= M < 1."""
    value = _real(text, 0.0, "a number with 0 <= M < 1", open_low=False)
    if value >= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number with 0 <= M < 1, got {text}")
    return value


def _probe(directory: str) -> None:
    """Create and delete a file in ``directory``: the only test of writability that holds for
    root, read-only mounts and network file systems alike (``os.access`` does not)."""
    descriptor, path = tempfile.mkstemp(prefix=".sim-probe-", dir=directory)
    os.close(descriptor)
    os.unlink(path)


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def check_writable(flag: str, path: str | None) -> None:
    """UsageError unless a file can be written at ``path`` (None: nothing to check)."""
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag}: {path} is a directory, not a file")
    if not os.path.isdir(directory):
        raise UsageError(f"{flag}: cannot write {path}: directory does not exist: {directory}")
    try:
        _probe(directory)
    except OSError as error:
        raise UsageError(f"{flag}: cannot write {path}: {_reason(error)}") from None


def check_output_dir(flag: str, path: str) -> bool:
    """UsageError unless ``path`` is, or can be made, a writable directory. Makes it; returns
    whether it was made here (so that a failed run can remove it again)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag}: {path} is a file, not a directory")
    made = not os.path.exists(path)
    try:
        os.makedirs(path, exist_ok=True)
        _probe(path)
    except OSError as error:
        if made and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        raise UsageError(f"{flag}: cannot write to directory {path}: {_reason(error)}") from None
    return made


@contextlib.contextmanager
def output_dir(flag: str, path: str) -> Iterator[None]:
    """``check_output_dir`` for the length of a run: a directory made here is removed again if
    the run ends with an exception (Ctrl-C included) while it is still empty."""
    made = check_output_dir(flag, path)
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only if empty: never delete what was written
        raise
