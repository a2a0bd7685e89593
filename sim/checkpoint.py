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



from softfloat16.npzfile import SCHEMA_VERSION, NpzFileError, load_npz, plain_json, save_npz

__all__ = ["SCHEMA_VERSION", "CheckpointError", "load_checkpoint", "save_checkpoint"]

#: A checkpoint file is unreadable, corrupt, truncated, or of an unknown schema (a ValueError;
#: the container's own error, so either name catches it).
CheckpointError = NpzFileError
_plain_json = plain_json  # numpy scalars made Python numbers; TypeError for what JSON cannot hold


# The container itself (softfloat16.npzfile) under sim's names: its docstrings and doctests say
# what is written, checked and refused.
save_checkpoint = save_npz
load_checkpoint = load_npz
