"""Op traces: the one schema, writer and reader of every recorded list of ops.

Two producers write it: sim's cross-check (``python -m sim crosscheck --dump``: the op kinds of
sim's training step, file kind ``"softfloat16-crosscheck-dump"``, :mod:`sim.crosscheck.dump`) and
``softfloat16.torch.record`` (every aten op of a torch run, file kind
``"softfloat16-torch-trace"``, :mod:`softfloat16.torch.recording`). Both go through
:func:`save_op_trace` and :func:`load_op_trace`; the file kind tells what its ops are.

The file is the core's container (:mod:`softfloat16.npzfile`: an uncompressed .npz of plain
arrays plus JSON metadata, SHA-256 checked, written atomically, read without pickle). Inside it:

- arrays ``v0``, ``v1``, ...: the arrays of every op input and output, each distinct array stored
  once (an op's input is usually an earlier op's output);
- metadata: ``kind`` (one of :data:`FILE_KINDS`), ``schema_version`` (1), ``side`` (``"torch"``
  or ``"emulator"``), ``mode`` (the producer's: ``exact`` / ``library`` for a dump, ``native`` /
  ``emulated`` for a torch trace), ``device``, ``settings`` and ``config`` (JSON objects),
  ``steps`` (a dump's training steps; a torch trace's op count) and ``ops``: one entry per op,
  ``{"step", "name", "kind", "impl", "attrs", "inputs": [[role, format, array], ...],
  "outputs": [...]}``.

Formats are the names of :data:`VALUE_FORMATS`: floating formats hold bit patterns (unsigned
integers of the format's width), the others their values. The table also names each format's
dtype (``fp16`` is ``float16``, ``torch.float16``), the one map between dtypes and format names.

>>> import os, tempfile
>>> x = [("x", "fp16", np.array([0xBC00], np.uint16))]
>>> op = TracedOp(0, "demo.relu", "relu", "sim", {}, x, [("out", "fp16", np.array([0], np.uint16))])
>>> path = os.path.join(tempfile.mkdtemp(), "ops.npz")
>>> save_op_trace(path, OpTrace([op], "emulator", "exact", {}, {}, {}, steps=1, kind=DUMP_KIND))
>>> trace = load_op_trace(path)
>>> trace.kind == DUMP_KIND, trace.ops[0].name, trace.ops[0].inputs[0][2]
(True, 'demo.relu', array([48128], dtype=uint16))
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Collection
from typing import Any

import numpy as np

from softfloat16 import formats as _formats
from softfloat16.npzfile import NpzFileError, load_npz, save_npz

__all__ = ["DUMP_KIND", "FILE_KINDS", "SCHEMA_VERSION", "SIDES", "TRACE_KIND", "VALUE_FORMATS", "OpTrace",
           "OpTraceError", "TracedOp", "Value", "ValueFormat", "fail", "format_of_dtype", "load_op_trace",
           "save_op_trace", "storage_dtype"]

SCHEMA_VERSION = 1
DUMP_KIND = "softfloat16-crosscheck-dump"
TRACE_KIND = "softfloat16-torch-trace"
#: file kind -> (short name, what it is): the words of the reader's errors.
FILE_KINDS = {
    DUMP_KIND: ("cross-check dump", "a cross-check dump of python -m sim crosscheck"),
    TRACE_KIND: ("trace", "a torch trace of softfloat16.torch.record"),
}
SIDES = ("torch", "emulator")
OP_FIELDS = ("step", "name", "kind", "impl", "attrs", "inputs", "outputs")
META_FIELDS = ("side", "mode", "device", "settings", "config", "steps", "ops")


@dataclasses.dataclass(frozen=True)
class ValueFormat:
    """One format a trace holds: its name, its dtype's name (numpy / torch), the numpy dtype of its
    stored arrays, and whether those hold bit patterns; ``format``: softfloat16's Format, if any."""

    name: str
    dtype_name: str
    storage: np.dtype
    bits: bool
    format: _formats.Format | None = None


def _value_formats() -> dict[str, ValueFormat]:
    def pattern(fmt: _formats.Format) -> ValueFormat:
        return ValueFormat(fmt.name, fmt.float_dtype_name, np.dtype(fmt.dtype), True, fmt)

    f = _formats
    fp64 = ValueFormat("fp64", "float64", np.dtype(np.uint64), True)  # bit patterns; no softfloat16 format
    floats = (pattern(f.fp16), pattern(f.bf16), pattern(f.fp32), fp64, pattern(f.fp8_e4m3fn), pattern(f.fp8_e5m2),
              pattern(f.fp8_e4m3fnuz), pattern(f.fp8_e5m2fnuz), pattern(f.e8m0))
    values = (ValueFormat(name, name, np.dtype(name), False)
              for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "complex64", "complex128"))
    return {value.name: value for value in (*floats, *values)}


#: Every format an op trace holds, by name: the one table of dtypes and format names.
VALUE_FORMATS: dict[str, ValueFormat] = _value_formats()
_BY_DTYPE_NAME = {value.dtype_name: name for name, value in VALUE_FORMATS.items()}


def storage_dtype(fmt: str) -> np.dtype:
    """numpy dtype of the arrays of a format (``fp16`` -> uint16, ``int64`` -> int64).

    >>> storage_dtype("bf16"), storage_dtype("fp64"), storage_dtype("bool")
    (dtype('uint16'), dtype('uint64'), dtype('bool'))
    """
    value = VALUE_FORMATS.get(fmt)
    if value is None:
        raise ValueError(f"unknown op-trace format {fmt!r}; accepted: {', '.join(VALUE_FORMATS)}")
    return value.storage


def format_of_dtype(dtype: Any) -> str | None:
    """The format name of a numpy or torch dtype (or its name); None for one a trace cannot hold.

    >>> format_of_dtype("bfloat16"), format_of_dtype(np.float64), format_of_dtype(np.bool_), format_of_dtype("str")
    ('bf16', 'fp64', 'bool', None)
    """
    if not isinstance(dtype, str):
        dtype = str(dtype).removeprefix("torch.") if type(dtype).__module__ == "torch" else np.dtype(dtype).name
    return _BY_DTYPE_NAME.get(dtype)


Value = tuple[str, str, np.ndarray]  # (role, format name, array)


@dataclasses.dataclass
class TracedOp:
    """One recorded op: its position, what it is, how it was computed, its arguments and values.

    ``step``: the training step (-1 before the first) or the op's position; ``impl``: who computed
    it; ``attrs``: its other arguments (JSON); ``inputs`` / ``outputs``: ``(role, format, array)``.
    """

    step: int
    name: str
    kind: str
    impl: str
    attrs: dict[str, Any]
    inputs: list[Value]
    outputs: list[Value]


@dataclasses.dataclass
class OpTrace:
    """A list of ops and the run's description; ``steps`` None means the op count."""

    ops: list[TracedOp]
    side: str
    mode: str
    device: dict[str, Any]
    settings: dict[str, Any]
    config: dict[str, Any]
    steps: int | None = None
    kind: str = ""  # one of FILE_KINDS


class OpTraceError(ValueError):
    """An op-trace file is unreadable, truncated, corrupt, of another kind or schema, or inconsistent."""


def _array_key(array: np.ndarray) -> tuple:
    return array.dtype.str, array.shape, hashlib.sha1(np.ascontiguousarray(array).tobytes()).hexdigest()


def save_op_trace(path: str | os.PathLike[str], trace: OpTrace) -> None:
    """Write ``trace`` to ``path`` atomically, each distinct array once (see the module doc).

    Raises ValueError, before anything is written, for an unknown kind, side or format, or an
    array whose dtype is not its format's.
    """
    if trace.kind not in FILE_KINDS:
        raise ValueError(f"kind: expected one of {', '.join(FILE_KINDS)}, got {trace.kind!r}")
    if trace.side not in SIDES:
        raise ValueError(f"side: expected one of {', '.join(SIDES)}, got {trace.side!r}")
    arrays: dict[str, np.ndarray] = {}
    keys: dict[tuple, str] = {}

    def store(index: int, op: TracedOp, values: list[Value]) -> list[list[str]]:
        stored = []
        for role, fmt, array in values:
            array = np.asarray(array)
            if array.dtype != storage_dtype(fmt):
                raise ValueError(f"op {index} ({op.name}) {role!r}: a {array.dtype} array for {fmt}, which "
                                 f"needs {storage_dtype(fmt)}")
            key = _array_key(array)
            if key not in keys:
                keys[key] = f"v{len(keys)}"
                arrays[keys[key]] = np.array(array, order="C")  # a copy; 0-d stays 0-d
            stored.append([role, fmt, keys[key]])
        return stored

    ops = [{"step": op.step, "name": op.name, "kind": op.kind, "impl": op.impl, "attrs": op.attrs,
            "inputs": store(index, op, op.inputs), "outputs": store(index, op, op.outputs)}
           for index, op in enumerate(trace.ops)]
    meta = {"kind": trace.kind, "schema_version": SCHEMA_VERSION, "side": trace.side, "mode": trace.mode,
            "device": trace.device, "settings": trace.settings, "config": trace.config,
            "steps": len(ops) if trace.steps is None else trace.steps, "ops": ops}
    save_npz(path, arrays, meta)


def fail(path: str | os.PathLike[str], message: str) -> OpTraceError:
    """The error for a problem in a trace file: ``path: message`` (also for a producer's own checks)."""
    return OpTraceError(f"{os.fspath(path)}: {message}")


def _values(path: str, where: str, entries: Any, arrays: dict[str, np.ndarray], used: set[str],
            accepted: Collection[str]) -> list[Value]:
    if not isinstance(entries, list):
        raise fail(path, f"{where} must be a list of [role, format, array], got {entries!r}")
    values = []
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, str) for x in entry)):
            raise fail(path, f"{where}: malformed entry {entry!r} (expected [role, format, array])")
        role, fmt, key = entry
        if fmt not in accepted:
            raise fail(path, f"{where} {role!r}: unknown format {fmt!r}")
        if key not in arrays:
            raise fail(path, f"{where} {role!r}: array {key!r} is missing from the file")
        if arrays[key].dtype != storage_dtype(fmt):
            raise fail(path, f"{where} {role!r}: array {key!r} has dtype {arrays[key].dtype}, but {fmt} needs "
                              f"{storage_dtype(fmt)}")
        used.add(key)
        values.append((role, fmt, arrays[key]))
    return values


def _op(path: str, index: int, op: Any, arrays: dict[str, np.ndarray], used: set[str], accepted: Collection[str],
        op_type: type[TracedOp]) -> TracedOp:
    where = f"op {index}"
    if not isinstance(op, dict) or set(op) != set(OP_FIELDS):
        fields = sorted(op) if isinstance(op, dict) else type(op).__name__
        raise fail(path, f"{where} must have exactly the fields {list(OP_FIELDS)}, got {fields}")
    step, name = op["step"], op["name"]
    if isinstance(step, bool) or not isinstance(step, int) or step < -1:
        raise fail(path, f"{where}: step must be an integer >= -1, got {step!r}")
    if not all(isinstance(op[field], str) and op[field] for field in ("name", "kind")) or \
            not isinstance(op["impl"], str):
        raise fail(path, f"{where}: name and kind must be non-empty strings, impl a string")
    if not isinstance(op["attrs"], dict):
        raise fail(path, f"{where} ({name}): attrs must be an object")
    inputs = _values(path, f"{where} ({name}) input", op["inputs"], arrays, used, accepted)
    outputs = _values(path, f"{where} ({name}) output", op["outputs"], arrays, used, accepted)
    return op_type(step, name, op["kind"], op["impl"], op["attrs"], inputs, outputs)


def _check_meta(path: str, meta: dict[str, Any], kinds: Collection[str]) -> None:
    kind = meta.get("kind")
    if kind not in kinds:
        wanted = " or ".join(FILE_KINDS[k][1] for k in kinds)
        what = FILE_KINDS[kind][1] if kind in FILE_KINDS else f"a file of kind {kind!r}"
        raise fail(path, f"not {wanted}: {what}")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise fail(path, f"{FILE_KINDS[kind][0]} schema version {version!r}; this code reads version "
                          f"{SCHEMA_VERSION}")
    missing = [field for field in META_FIELDS if field not in meta]
    if missing:
        raise fail(path, f"metadata lacks {missing}")
    if meta["side"] not in SIDES or not isinstance(meta["mode"], str):
        raise fail(path, f"side must be one of {SIDES} and mode a string, got {meta['side']!r}, {meta['mode']!r}")
    steps = meta["steps"]
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise fail(path, f"steps must be a non-negative integer, got {steps!r}")
    for field in ("device", "settings", "config"):
        if not isinstance(meta[field], dict):
            raise fail(path, f"{field} must be an object, got {type(meta[field]).__name__}")
    if not isinstance(meta["ops"], list):
        raise fail(path, "ops must be a list")


def load_op_trace(path: str | os.PathLike[str], kind: str | None = None, *, formats: Collection[str] | None = None,
                  op_type: type[TracedOp] = TracedOp, trace_type: type[OpTrace] = OpTrace) -> OpTrace:
    """Read and validate a file written by :func:`save_op_trace`.

    ``kind``: the file kind expected (None: any of :data:`FILE_KINDS`); ``formats``: the formats
    accepted (default: all of :data:`VALUE_FORMATS`); ``op_type`` / ``trace_type``: the classes
    built (subclasses of :class:`TracedOp` / :class:`OpTrace`).

    Raises :class:`OpTraceError`, one line naming the file and the problem: truncated or corrupt
    (the container's SHA-256 check), not an op trace of that kind (a checkpoint, say), another
    schema version, or an inconsistent op list (malformed ops, unknown formats, arrays missing,
    of the wrong dtype, or left over). A missing file raises FileNotFoundError.
    """
    path = os.fspath(path)
    if kind is not None and kind not in FILE_KINDS:
        raise ValueError(f"kind: expected one of {', '.join(FILE_KINDS)} or None, got {kind!r}")
    kinds = tuple(FILE_KINDS) if kind is None else (kind,)
    try:
        arrays, meta = load_npz(path)
    except NpzFileError as error:
        noun = FILE_KINDS[kind][0] if kind in FILE_KINDS else "op trace"
        raise OpTraceError(f"cannot read the {noun}: {error}") from error
    _check_meta(path, meta, kinds)
    accepted = VALUE_FORMATS if formats is None else formats
    used: set[str] = set()
    ops = [_op(path, index, op, arrays, used, accepted, op_type) for index, op in enumerate(meta["ops"])]
    unused = sorted(set(arrays) - used)
    if unused:
        raise fail(path, f"arrays {unused[:5]} are not referenced by any op")
    return trace_type(ops, meta["side"], meta["mode"], meta["device"], meta["settings"], meta["config"],
                      steps=meta["steps"], kind=meta["kind"])
