"""Checksummed .npz files: named arrays plus JSON metadata, no pickle, written atomically.

The container of sim's checkpoints and cross-check dumps and of ``softfloat16.torch``'s op
traces (it lives in the core so that ``softfloat16`` never imports ``sim``). The file is an
ordinary uncompressed .npz (``np.load(path, allow_pickle=False)`` opens it):

- one ``<name>.npy`` entry per array;
- ``__meta__.npy``: the metadata as UTF-8 JSON bytes in a uint8 array;
- ``__checkpoint__.npy``: a header, also UTF-8 JSON in a uint8 array, holding the container
  name (``"softfloat16-sim-checkpoint"``: the name the first files carried, kept so that every
  file written since still loads; what a file holds is told by its metadata, e.g. ``kind``), the
  schema version, the list of array names and a SHA-256 digest. The digest covers, for each
  array in name order, its name, dtype, shape and bytes, then the metadata's JSON bytes.

Saving writes a temporary file in the target's directory, flushes and fsyncs it, then renames it
over the target (``softfloat16.atomic``), so a crash or error leaves either the old file or the
new one, never a partial file; the file gets the permissions of any file ``open()`` creates.
Entries carry a fixed timestamp, so equal contents give byte-identical files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib import format as npy_format

from .atomic import open_atomic

__all__ = ["CONTAINER", "SCHEMA_VERSION", "NpzFileError", "load_npz", "plain_json", "save_npz"]

SCHEMA_VERSION = 1
CONTAINER = "softfloat16-sim-checkpoint"
_HEADER, _META = "__checkpoint__", "__meta__"
_ALLOWED_KINDS = "biufc"  # bool, signed, unsigned, float, complex: plain bytes, never pickled
# What reading damaged bytes through zipfile and numpy's .npy parser raises (found by flipping
# every byte of a small file); only the read calls themselves are guarded by it.
_READ_ERRORS = (
    OSError,
    EOFError,
    ValueError,
    KeyError,
    SyntaxError,
    RuntimeError,  # zipfile, when a damaged flag claims the entry is encrypted
    NotImplementedError,  # zipfile, for a damaged "version needed to extract" field
    zipfile.BadZipFile,
)


# The first bytes of a zip archive (an .npz): a local file header, or the end record of an empty one.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


class NpzFileError(ValueError):
    """A file is unreadable, corrupt, truncated, not of this container, or of an unknown schema."""


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"array names must be strings, got {name!r}")
    if not name or name.startswith("__") or any(c in name for c in "/\\\0"):
        raise ValueError(
            f"array name {name!r} is not allowed: it must be non-empty, must not start with '__' "
            "(reserved) and must not contain '/', '\\' or NUL"
        )
    return name


def plain_json(value: Any, where: str) -> Any:
    """``value`` with numpy scalars made Python numbers; TypeError for what JSON cannot hold.

    Checked up front because ``json`` would silently turn non-string keys into strings.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()  # exact: FP32/FP16 values are exact Python floats
    if isinstance(value, (list, tuple)):
        return [plain_json(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, dict):
        plain = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has a non-string key {key!r}; JSON keys are strings")
            plain[key] = plain_json(item, f"{where}[{key!r}]")
        return plain
    raise TypeError(f"{where} is {type(value).__name__}, which JSON cannot hold: {value!r}")


def _digest(arrays: Mapping[str, np.ndarray], meta_json: bytes) -> str:
    sha = hashlib.sha256()
    for name in sorted(arrays):
        array = arrays[name]
        # Length-prefixed fields, so no two different contents give the same byte stream.
        descriptor = json.dumps([name, array.dtype.str, list(array.shape)]).encode()
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        for field in (descriptor, data):
            sha.update(len(field).to_bytes(8, "little"))
            sha.update(field)
    sha.update(meta_json)
    return sha.hexdigest()


def _json_array(document: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(document).encode("utf-8"), dtype=np.uint8)


def _write_entry(archive: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    info = zipfile.ZipInfo(f"{name}.npy")  # default timestamp 1980-01-01: reproducible bytes
    info.compress_type = zipfile.ZIP_STORED
    with archive.open(info, "w", force_zip64=True) as member:
        npy_format.write_array(member, array, allow_pickle=False)


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (POSIX); where directories cannot be opened, skip."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


def save_npz(
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
    >>> save_npz(path, {"w": np.arange(3, dtype=np.uint16)}, {"step": 10})
    >>> arrays, meta = load_npz(path)
    >>> arrays["w"], meta
    (array([0, 1, 2], dtype=uint16), {'step': 10})
    """
    path = os.fspath(path)
    if not isinstance(arrays, Mapping):
        raise TypeError(f"arrays must be a mapping of names to arrays, got {type(arrays).__name__}")
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
    for name, array in arrays.items():
        _check_name(name)
        if not isinstance(array, np.ndarray):
            raise TypeError(f"arrays[{name!r}] must be a numpy array, got {type(array).__name__}")
        if array.dtype.kind not in _ALLOWED_KINDS:
            raise TypeError(
                f"arrays[{name!r}] has dtype {array.dtype}; only bool, integer, float and "
                "complex arrays are stored (anything else would need pickle)"
            )
    meta_json = json.dumps(plain_json(meta, "meta")).encode("utf-8")
    header = {
        "format": CONTAINER,
        "schema_version": SCHEMA_VERSION,
        "arrays": sorted(arrays),
        "sha256": _digest(arrays, meta_json),
    }
    with open_atomic(path, "wb") as file:
        with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name in header["arrays"]:
                _write_entry(archive, name, arrays[name])
            _write_entry(archive, _META, np.frombuffer(meta_json, dtype=np.uint8))
            _write_entry(archive, _HEADER, _json_array(header))
    _fsync_directory(os.path.dirname(os.path.abspath(path)))


def _read_json_entry(npz: Any, entry: str, path: str) -> tuple[Any, bytes]:
    """The JSON document stored in ``entry``, and its raw bytes."""
    try:
        raw = npz[entry]
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError(f"expected a 1-D uint8 array, got {raw.dtype} {raw.shape}")
        data = raw.tobytes()
        return json.loads(data.decode("utf-8")), data
    except _READ_ERRORS as error:  # json and UTF-8 errors are ValueErrors too
        raise NpzFileError(f"{path}: entry {entry!r} is corrupt: {error}") from error


def _check_header(header: Any, path: str) -> list[str]:
    if not isinstance(header, dict) or header.get("format") != CONTAINER:
        raise NpzFileError(f"{path}: not a {CONTAINER} file (its header is {header!r})")
    version = header.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise NpzFileError(
            f"{path}: container schema version {version!r}; this code reads version "
            f"{SCHEMA_VERSION} only"
        )
    names, digest = header.get("arrays"), header.get("sha256")
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        raise NpzFileError(f"{path}: header's array list is malformed: {names!r}")
    if not (isinstance(digest, str) and len(digest) == 64):
        raise NpzFileError(f"{path}: header's sha256 is malformed: {digest!r}")
    return names


def load_npz(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read a file written by :func:`save_npz`: ``(arrays, meta)``.

    Raises :class:`NpzFileError` (a ValueError) naming the file and the problem when the
    file is truncated or corrupt, is not such a file, has another schema version, lacks
    or adds entries, or fails its SHA-256 check. A missing file raises FileNotFoundError.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "bad.npz")
    >>> with open(path, "wb") as file:
    ...     _ = file.write(b"PK\\x03\\x04 not really a zip")
    >>> try:
    ...     load_npz(path)
    ... except NpzFileError as error:
    ...     print(str(error).split(": ")[1])
    not a readable .npz file (truncated or corrupt?)
    """
    path = os.fspath(path)
    with open(path, "rb") as file:  # FileNotFoundError passes through, as documented
        magic = file.read(4)
    if magic == b"\x93NUM":
        raise NpzFileError(f"{path}: a single .npy array, not a {CONTAINER} file")
    if magic not in _ZIP_MAGIC:  # np.load would try pickle, and say so in its error
        raise NpzFileError(f"{path}: not an .npz archive (it starts with {magic!r})")
    try:
        npz = np.load(path, allow_pickle=False)
    except _READ_ERRORS as error:
        message = f"{path}: not a readable .npz file (truncated or corrupt?): {error}"
        raise NpzFileError(message) from error
    with npz:
        entries = set(npz.files)
        if _HEADER not in entries:
            raise NpzFileError(
                f"{path}: no {_HEADER!r} entry, so not a file written by save_npz"
            )
        header, _ = _read_json_entry(npz, _HEADER, path)
        names = _check_header(header, path)
        expected = {*names, _HEADER, _META}
        if entries != expected:
            raise NpzFileError(
                f"{path}: entries do not match the header: missing {sorted(expected - entries)}, "
                f"unexpected {sorted(entries - expected)}"
            )
        arrays = {}
        for name in names:
            try:
                arrays[name] = npz[name]
            except _READ_ERRORS as error:
                raise NpzFileError(f"{path}: array {name!r} is corrupt: {error}") from error
        meta, meta_json = _read_json_entry(npz, _META, path)
    if not isinstance(meta, dict):
        raise NpzFileError(f"{path}: metadata is not a JSON object")
    if _digest(arrays, meta_json) != header["sha256"]:
        raise NpzFileError(f"{path}: SHA-256 checksum mismatch: the file is corrupt")
    return arrays, meta
