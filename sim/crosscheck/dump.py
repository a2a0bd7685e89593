"""The cross-check dump: one run's op records in one op-trace file (:mod:`softfloat16.optrace`).

The schema, writer and reader are the core's, shared with ``softfloat16.torch``'s op traces: an
uncompressed .npz of plain arrays plus JSON metadata (:mod:`softfloat16.npzfile`), SHA-256
checked, written atomically, no pickle, so a truncated or damaged file is caught before its
contents are read. A dump's file kind is ``"softfloat16-crosscheck-dump"`` (a torch trace's,
``"softfloat16-torch-trace"``, is refused by name: its ops are aten ops). Its metadata:
``schema_version`` (1), ``side`` (``"torch"`` or ``"emulator"``), ``mode`` (``"exact"`` /
``"library"``), ``device`` (device, library versions, hardware), ``settings`` (the NaN profile
that matches the side: ``x86`` for torch on a CPU, ``cuda`` on a GPU, ``ieee`` for sim; ``ftz``;
torch's switches), ``config`` (the :class:`~sim.train.TrainConfig`), ``steps``, and ``ops``: one
entry per op, ``{"step", "name", "kind", "impl", "attrs", "inputs": [[role, format, array], ...],
"outputs": [...]}``; arrays ``v0``, ``v1``, ... hold each distinct bit array once. A dump's
formats are ``fp16``, ``bf16``, ``fp32``, ``fp8_e4m3fn``, ``fp8_e5m2`` (bit patterns, unsigned
integers of the format's width), ``bool``, ``int32`` and ``int64``; its op kinds are
:data:`~sim.crosscheck.record.KINDS` and ``source`` / ``state``. (The FP8 formats and kinds came
later without a version change: older dumps read as before.)

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
import os
from typing import Any

from sim.crosscheck.record import DATA_FORMATS, FLOAT_FORMATS, KINDS, OpRecord
from softfloat16.optrace import (
    DUMP_KIND, SCHEMA_VERSION, SIDES, OpTrace, OpTraceError, fail, load_op_trace, save_op_trace,
)

__all__ = ["DUMP_KIND", "SCHEMA_VERSION", "SIDES", "Dump", "DumpError", "load_dump", "save_dump"]

_RECORD_KINDS = {*KINDS, "source", "state"}
_FORMATS = frozenset({*FLOAT_FORMATS, *DATA_FORMATS})

#: A dump file is unreadable, truncated, corrupt, of another schema, or inconsistent (a ValueError;
#: the op-trace reader's own error, so either name catches it).
DumpError = OpTraceError


@dataclasses.dataclass
class Dump(OpTrace):
    """A loaded dump: its records (:attr:`records`, in program order) and its metadata."""

    kind: str = DUMP_KIND

    @property
    def records(self) -> list[OpRecord]:
        return self.ops


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
    """Write ``records`` and the run's description to ``path`` (atomically; see module doc).
    ValueError, before anything is written, for an unknown side or an array of the wrong dtype."""
    save_op_trace(path, Dump(list(records), side, mode, device or {}, settings or {}, config, steps=steps))


def load_dump(path: str | os.PathLike[str]) -> Dump:
    """Read and validate a dump written by :func:`save_dump`.

    Raises :class:`DumpError` naming the file and the problem: truncated or corrupt (the
    container's check), not a cross-check dump, another schema version, or an inconsistent op
    list (unknown kinds or formats, arrays missing, of the wrong dtype, or left over).
    A missing file raises FileNotFoundError.
    """
    dump = load_op_trace(path, DUMP_KIND, formats=_FORMATS, op_type=OpRecord, trace_type=Dump)
    for index, record in enumerate(dump.records):
        if record.kind not in _RECORD_KINDS:
            raise fail(path, f"op {index} ({record.name}): unknown op kind {record.kind!r}")
    return dump
