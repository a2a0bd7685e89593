"""Atomic file writes: a temporary file beside the target, renamed over it once complete.

The one way the package (and ``sim``) writes a file that must never be seen half-written:
verify checkpoints, checksummed .npz files (checkpoints, dumps, traces), results documents. A
crash or an exception leaves the old file or the new one, never a partial file, and no temporary
file behind.

The temporary file is created with the permissions ``open()`` gives a new file (0o666 less the
umask, and any default ACL of the directory), so the renamed result reads like every other
output, not owner-only as ``tempfile.mkstemp`` would leave it.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from typing import IO

__all__ = ["open_atomic"]

_ATTEMPTS = 100   # names tried before giving up: each is 48 random bits, so one is all it takes


def _create_beside(directory: str, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file in ``directory`` (descriptor, path), created exclusively with mode 0o666 for the
    kernel to reduce by the umask, as ``open(path, "w")`` does."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_ATTEMPTS):
        path = os.path.join(directory, f"{prefix}{secrets.token_hex(6)}{suffix}")
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {prefix}*{suffix} in {directory}")


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = None,
                prefix: str | None = None, suffix: str = ".tmp") -> Iterator[IO]:
    """Open a temporary file in ``path``'s directory for writing (``mode`` "w" or "wb"); when the
    block ends without an exception, flush it, fsync it and rename it over ``path``. On an
    exception the temporary file is removed and ``path`` is left as it was. The temporary name
    is ``prefix`` (default: ``.`` and the target's name and a dot), random hex, then ``suffix``.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with open_atomic(os.path.join(folder, "note.txt"), encoding="utf-8") as f:
    ...     _ = f.write("done\\n")
    >>> os.listdir(folder), open(os.path.join(folder, "note.txt")).read()
    (['note.txt'], 'done\\n')
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode: expected 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = _create_beside(directory, f".{os.path.basename(path)}." if prefix is None else prefix,
                                           suffix)
    try:
        with os.fdopen(descriptor, mode, encoding=encoding) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())  # the bytes are on disk before the name points at them
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
