"""The cross-check dump: one run's op records in one .npz file, no pickle, validated on load.

The container is :mod:`sim.checkpoint`'s, the core's :mod:`softfloat16.npzfile` (an
uncompressed .npz of plain arrays plus JSON metadata, SHA-256 checked, written atomically), so a
truncated or damaged file is caught before its contents are read. ``softfloat16.torch``'s op
traces use the same container and op schema with their own ``kind``
(``"softfloat16-torch-trace"``, :mod:`softfloat16.torch.record`). Inside it:

- arrays ``v0``, ``v1``, ...: the bit arrays of every op input and output, each distinct array
  stored once (an op's input is usually an earlier op's output);
- metadata (JSON): ``kind`` = ``"softfloat16-crosscheck-dump"``, ``schema_version`` (1),
  ``side`` (``"torch"`` or ``"emulator"``), ``mode`` (``"exact"`` / ``"library"``), ``device``
  (device, library versions, hardware), ``settings`` (the NaN profile that matches the side:
  ``x86`` for torch on a CPU, ``cuda`` on a GPU, ``ieee`` for sim; ``ftz``; torch's switches),
  ``config`` (the :class:`~sim.train.TrainConfig`), ``steps``, and ``ops``: one entry per op,
  ``{"step", "name", "kind", "impl", "attrs", "inputs": [[role, format, array], ...],
  "outputs": [...]}``. Formats are ``fp16``, ``bf16``, ``fp32``, ``fp8_e4m3fn``, ``fp8_e5m2``
  (bit patterns, unsigned integers of the format's width), ``bool``, ``int32`` and ``int64``.
  (The FP8 formats and kinds came later without a version change: older dumps read as before.)

>>> import os, tempfile, numpy as np
>>> from sim.crosscheck.record import OpRecord
>>> op = OpRecord(0, "demo.relu", "relu", "sim", {}, [("x", "fp16", np.array([0xBC00], np.uint16))],
...               [("out", "fp16", np.array([0], np.uint16))])
>>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
>>> save_dump(path, [op], side="emulator", mode="exact", config={"precision": "fp16"}, steps=1)
>>> dump = load_dump(path)
>>> dump.side, dump.records[0].label(), dump.records[0].inputs[0][2]
('emulator', 'step 0 demo.relu', array([48128], dtype=uint16))
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

import numpy as np

from sim.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from sim.crosscheck.record import DATA_FORMATS, FLOAT_FORMATS, KINDS, OpRecord, storage_dtype

__all__ = ["DUMP_KIND", "SCHEMA_VERSION", "Dump", "DumpError", "load_dump", "save_dump"]

DUMP_KIND = "softfloat16-crosscheck-dump"
SCHEMA_VERSION = 1
SIDES = ("torch", "emulator")
_RECORD_KINDS = {*KINDS, "source", "state"}
_OP_FIELDS = ("step", "name", "kind", "impl", "attrs", "inputs", "outputs")


class DumpError(ValueError):
    """A dump file is unreadable, truncated, corrupt, of another schema, or inconsistent."""


@dataclasses.dataclass
class Dump:
    """A loaded dump: its records (in program order) and its metadata."""

    records: list[OpRecord]
    side: str
    mode: str
    steps: int
    config: dict[str, Any]
    device: dict[str, Any]
    settings: dict[str, Any]


def _array_key(array: np.ndarray) -> tuple:
    return array.dtype.str, array.shape, hashlib.sha1(np.ascontiguousarray(array).tobytes()).hexdigest()


def save_dump(
    path: str | os.PathLike[str],
    records: list[OpRecord],
    *,
    side: str,
    mode: str,
    config: dict[str, Any],
    steps: int,
    device: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Write ``records`` and the run's description to ``path`` (atomically; see module doc)."""
    if side not in SIDES:
        raise ValueError(f"side: expected one of {', '.join(SIDES)}, got {side!r}")
    arrays: dict[str, np.ndarray] = {}
    keys: dict[tuple, str] = {}

    def store(bits: np.ndarray) -> str:
        key = _array_key(bits)
        if key not in keys:
            keys[key] = f"v{len(keys)}"
            arrays[keys[key]] = np.array(bits, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        return keys[key]

    ops = [{
        "step": r.step, "name": r.name, "kind": r.kind, "impl": r.impl, "attrs": r.attrs,
        "inputs": [[role, fmt, store(bits)] for role, fmt, bits in r.inputs],
        "outputs": [[role, fmt, store(bits)] for role, fmt, bits in r.outputs],
    } for r in records]
    meta = {
        "kind": DUMP_KIND, "schema_version": SCHEMA_VERSION, "side": side, "mode": mode,
        "device": device or {}, "settings": settings or {}, "config": config, "steps": steps, "ops": ops,
    }
    save_checkpoint(path, arrays, meta)


def _fail(path: str, message: str) -> DumpError:
    return DumpError(f"{path}: {message}")


def _check_values(path: str, where: str, values: Any, arrays: dict[str, np.ndarray], used: set[str]) -> list:
    if not isinstance(values, list):
        raise _fail(path, f"{where} must be a list of [role, format, array], got {values!r}")
    checked = []
    for entry in values:
        if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, str) for x in entry)):
            raise _fail(path, f"{where}: malformed entry {entry!r} (expected [role, format, array])")
        role, fmt, key = entry
        if fmt not in FLOAT_FORMATS and fmt not in DATA_FORMATS:
            raise _fail(path, f"{where} {role!r}: unknown format {fmt!r}")
        if key not in arrays:
            raise _fail(path, f"{where} {role!r}: array {key!r} is missing from the file")
        array = arrays[key]
        if array.dtype != storage_dtype(fmt):
            raise _fail(path, f"{where} {role!r}: array {key!r} has dtype {array.dtype}, but {fmt} needs "
                              f"{storage_dtype(fmt)}")
        used.add(key)
        checked.append((role, fmt, array))
    return checked


def _record(path: str, index: int, op: Any, arrays: dict[str, np.ndarray], used: set[str]) -> OpRecord:
    where = f"op {index}"
    if not isinstance(op, dict) or set(op) != set(_OP_FIELDS):
        fields = sorted(op) if isinstance(op, dict) else type(op).__name__
        raise _fail(path, f"{where} must have exactly the fields {list(_OP_FIELDS)}, got {fields}")
    step, name, kind = op["step"], op["name"], op["kind"]
    if isinstance(step, bool) or not isinstance(step, int) or step < -1:
        raise _fail(path, f"{where}: step must be an integer >= -1, got {step!r}")
    if not isinstance(name, str) or not name or not isinstance(op["impl"], str):
        raise _fail(path, f"{where}: name and impl must be strings, got {name!r} and {op['impl']!r}")
    if kind not in _RECORD_KINDS:
        raise _fail(path, f"{where} ({name}): unknown op kind {kind!r}")
    if not isinstance(op["attrs"], dict):
        raise _fail(path, f"{where} ({name}): attrs must be an object")
    inputs = _check_values(path, f"{where} ({name}) input", op["inputs"], arrays, used)
    outputs = _check_values(path, f"{where} ({name}) output", op["outputs"], arrays, used)
    return OpRecord(step, name, kind, op["impl"], op["attrs"], inputs, outputs)


def load_dump(path: str | os.PathLike[str]) -> Dump:
    """Read and validate a dump written by :func:`save_dump`.

    Raises :class:`DumpError` naming the file and the problem: truncated or corrupt (the
    container's check), not a cross-check dump, another schema version, or an inconsistent op
    list (unknown kinds or formats, arrays missing, of the wrong dtype, or left over).
    A missing file raises FileNotFoundError.
    """
    path = os.fspath(path)
    try:
        arrays, meta = load_checkpoint(path)
    except CheckpointError as error:
        raise DumpError(f"cannot read the cross-check dump: {error}") from error
    if meta.get("kind") != DUMP_KIND:
        raise _fail(path, f"not a cross-check dump (its kind is {meta.get('kind')!r}, expected {DUMP_KIND!r})")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise _fail(path, f"cross-check dump schema version {version!r}; this code reads version {SCHEMA_VERSION}")
    missing = [k for k in ("side", "mode", "device", "settings", "config", "steps", "ops") if k not in meta]
    if missing:
        raise _fail(path, f"metadata lacks {missing}")
    if meta["side"] not in SIDES:
        raise _fail(path, f"side must be one of {SIDES}, got {meta['side']!r}")
    steps = meta["steps"]
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise _fail(path, f"steps must be a non-negative integer, got {steps!r}")
    for field in ("device", "settings", "config"):
        if not isinstance(meta[field], dict):
            raise _fail(path, f"{field} must be an object, got {type(meta[field]).__name__}")
    if not isinstance(meta["ops"], list):
        raise _fail(path, "ops must be a list")
    used: set[str] = set()
    records = [_record(path, index, op, arrays, used) for index, op in enumerate(meta["ops"])]
    unused = sorted(set(arrays) - used)
    if unused:
        raise _fail(path, f"arrays {unused[:5]} are not referenced by any op")
    return Dump(records, meta["side"], meta["mode"], steps, meta["config"], meta["device"], meta["settings"])
