"""Checkpoints: named arrays plus JSON metadata in one .npz file, checksummed, written atomically.

The container is the core's :mod:`softfloat16.npzfile` (sim builds on the core; the core's op
traces of ``softfloat16.torch`` use the same files). The file is an ordinary uncompressed .npz
(``np.load`` opens it) with no pickled data:

- one ``<name>.npy`` entry per array;
- ``__meta__.npy``: the metadata as UTF-8 JSON bytes in a uint8 array;
- ``__checkpoint__.npy``: a header, also UTF-8 JSON in a uint8 array, holding the format name,
  the schema version, the list of array names and a SHA-256 digest. The digest covers, for each
  array in name order, its name, dtype, shape and bytes, then the metadata's JSON bytes.

Saving writes a temporary file in the target's directory, flushes and fsyncs it, then renames it
over the target (``os.replace`` is atomic), so a crash or error leaves either the old checkpoint
or the new one, never a partial file. Entries carry a fixed timestamp, so equal contents give
byte-identical files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from softfloat16.npzfile import SCHEMA_VERSION, NpzFileError, load_npz, plain_json, save_npz

__all__ = ["SCHEMA_VERSION", "CheckpointError", "load_checkpoint", "save_checkpoint"]

#: A checkpoint file is unreadable, corrupt, truncated, or of an unknown schema (a ValueError;
#: the container's own error, so either name catches it).
CheckpointError = NpzFileError
_plain_json = plain_json  # numpy scalars made Python numbers; TypeError for what JSON cannot hold


def save_checkpoint(
    path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray], meta: dict[str, Any]
) -> None:
    """Write ``arrays`` and ``meta`` to ``path`` (exactly that name), atomically.

    ``arrays``: numpy arrays of bool, integer, float or complex dtype, saved bit-exactly.
    ``meta``: JSON-compatible data (dicts with string keys, lists, str, int, float incl. NaN and
    inf, bool, None; numpy scalars become Python numbers, tuples become lists). Everything is
    checked before anything is written: on any error the previous file at ``path`` is untouched
    and no temporary file is left behind.

    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "run.npz")
    >>> save_checkpoint(path, {"w": np.arange(3, dtype=np.uint16)}, {"step": 10})
    >>> arrays, meta = load_checkpoint(path)
    >>> arrays["w"], meta
    (array([0, 1, 2], dtype=uint16), {'step': 10})
    """
    save_npz(path, arrays, meta)


def load_checkpoint(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read a checkpoint written by :func:`save_checkpoint`: ``(arrays, meta)``.

    Raises :class:`CheckpointError` (a ValueError) naming the file and the problem when the
    file is truncated or corrupt, is not such a checkpoint, has another schema version, lacks
    or adds entries, or fails its SHA-256 check. A missing file raises FileNotFoundError.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "bad.npz")
    >>> with open(path, "wb") as file:
    ...     _ = file.write(b"PK\\x03\\x04 not really a zip")
    >>> try:
    ...     load_checkpoint(path)
    ... except CheckpointError as error:
    ...     print(str(error).split(": ")[1])
    not a readable .npz file (truncated or corrupt?)
    """
    return load_npz(path)
