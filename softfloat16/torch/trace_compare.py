"""Two recorded op traces compared op by op: the first divergent op, and the replay that tells a
divergence of one op from one inherited from its inputs.

:func:`compare_traces` walks both traces' op lists (which must name the same ops in the same
order, with outputs of the same formats and shapes: else :class:`TraceMismatch`) and compares
every op's outputs element by element (NaNs by class, quiet or signaling, unless
``strict_nan``). :func:`replay_traces` recomputes every op of the first trace on the emulator
from that trace's recorded inputs and compares the results with the second trace's outputs: an
op whose inputs are the same in both traces and whose outputs differ diverges on its own (a
*local* divergence), whatever happened before it.

>>> import numpy as np
>>> from softfloat16.torch.recording import Trace, TraceOp
>>> def trace(out):
...     x = [("self", "fp16", np.array([0x3C00, 0xBC00], np.uint16))]
...     op = TraceOp(0, "aten.relu.default", "aten", "torch-cpu", {"module": "act", "phase": "forward"}, x,
...                  [("out", "fp16", np.array(out, np.uint16))])
...     return Trace([op], "torch", "native", {}, {}, {})
>>> result = compare_traces(trace([0x3C00, 0x0000]), trace([0x3C01, 0x0000]))
>>> first = result.first
>>> first.op.label(), first.role, first.elements[0].index, first.elements[0].ulp, first.inputs_identical
('op 0 aten.relu.default [module act, forward]', 'out', (0,), 1, True)
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import numpy as np
import torch

from softfloat16.compare import describe, mismatch_mask, short_value, ulp_distance
from softfloat16.linalg import TensorCore
from softfloat16.optrace import VALUE_FORMATS

from .machine import Machine
from .mode import EmulationMode
from .recording import (
    UNINITIALIZED, NotReplayable, Trace, TraceOp, Value, decode, encode, tensor_from_value,
)

__all__ = ["Comparison", "ElementDiff", "OpDiff", "TraceMismatch", "check_same_program", "compare_traces",
           "format_comparison", "machine_from_settings", "randomness_switched_off", "replay_op", "replay_traces",
           "show_value"]

# The trace formats that are softfloat16 formats (compared and shown through them).
_SF_FORMATS = frozenset(name for name, value in VALUE_FORMATS.items() if value.format is not None)
_FP64_SIGN, _FP64_MAGNITUDE = np.uint64(1 << 63), np.uint64((1 << 63) - 1)
_FP64_INF, _FP64_QUIET = np.uint64(0x7FF0000000000000), np.uint64(1 << 51)


class TraceMismatch(ValueError):
    """The two traces do not record the same program: their op lists (names, order, or the
    formats and shapes of the values) differ. The message names the first mismatching op."""


# --- element comparison -------------------------------------------------------------------


def _fp64_keys(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ordered position, is NaN) of float64 bit patterns (sf has no fp64 format)."""
    magnitude = bits & _FP64_MAGNITUDE
    key = magnitude.astype(np.int64)
    return np.where(bits & _FP64_SIGN, -key, key), magnitude > _FP64_INF


def _mismatch(a: np.ndarray, b: np.ndarray, fmt: str, nan: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(mask of differing elements, ulp distances or None where the format has none; -1 for NaN)."""
    if fmt in _SF_FORMATS:
        return mismatch_mask(a, b, fmt, nan=nan), np.asarray(ulp_distance(a, b, fmt))
    if fmt == "fp64":
        (key_a, nan_a), (key_b, nan_b) = _fp64_keys(a), _fp64_keys(b)
        differ = a != b
        nan_differ = differ if nan == "strict" else (a & _FP64_QUIET) != (b & _FP64_QUIET)
        mask = np.where(nan_a | nan_b, ~(nan_a & nan_b) | nan_differ, differ)
        return mask, np.where(nan_a | nan_b, -1, np.abs(key_a - key_b))
    # Values (integers, booleans, complex): compared byte for byte.
    width = a.dtype.itemsize
    as_bytes = [np.ascontiguousarray(x).view(np.uint8).reshape(x.shape + (width,)) for x in (a, b)]
    return np.any(as_bytes[0] != as_bytes[1], axis=-1), None


def show_value(value: Any, fmt: str) -> str:
    """One element for a report: ``0x3c01 (1.0009765625)`` for a bit pattern, else the value.

    >>> show_value(0x3C01, "fp16"), show_value(0xC000000000000000, "fp64"), show_value(7, "int64")
    ('0x3c01 (1.0009765625)', '0xc000000000000000 (-2.0)', '7')
    """
    if fmt in _SF_FORMATS:
        description = describe(int(value), fmt)
        if description.kind in ("qnan", "snan", "nan", "inf"):
            decimal = description.kind if description.kind != "inf" else ("-inf" if description.sign else "inf")
        elif description.kind == "zero":
            decimal = "-0.0" if description.sign else "0.0"
        else:
            decimal = short_value(description.value)
        return f"{description.hex} ({decimal})"
    if fmt == "fp64":
        return f"0x{int(value):016x} ({float(np.uint64(value).view(np.float64))!r})"
    return repr(value.item() if isinstance(value, np.generic) else value)


@dataclasses.dataclass
class ElementDiff:
    """One differing element: its index (row-major, multi-dimensional), both values, ulp distance
    (None for non-float formats and NaNs)."""

    index: tuple[int, ...]
    a: Any
    b: Any
    ulp: int | None


@dataclasses.dataclass
class OpDiff:
    """An op whose outputs differ: where (``op``, the first trace's record; ``other``, the
    second's), the first differing output (``role``, ``fmt``, ``shape``) and its first differing
    elements, the differing element count over all outputs of the op, the largest ulp distance,
    and whether the op's recorded inputs are bit-identical in both traces."""

    op: TraceOp
    other: TraceOp
    role: str
    fmt: str
    shape: tuple[int, ...]
    elements: list[ElementDiff]
    differing: int
    total: int
    max_ulp: int | None
    inputs_identical: bool
    note: str = ""


def _inputs_identical(op: TraceOp, other: TraceOp) -> bool:
    """Whether the values the op reads are bit-identical in both traces (an argument it only
    writes, such as ``out=``, is left out: its old contents are no input)."""
    skip = set(op.attrs.get("write_only", ()))

    def read(values: list[Value]) -> list[Value]:
        return [(r, f, a) for r, f, a in values if r.split(".")[0] not in skip]

    first, second = read(op.inputs), read(other.inputs)
    if [(r, f, a.shape) for r, f, a in first] != [(r, f, a.shape) for r, f, a in second]:
        return False
    return all(np.array_equal(np.atleast_1d(a).view(np.uint8), np.atleast_1d(b).view(np.uint8))
               for (_, _, a), (_, _, b) in zip(first, second))


def _diff_op(op: TraceOp, other: TraceOp, outputs: list[Value], expected: list[Value], nan: str, max_rows: int
             ) -> OpDiff | None:
    """Compare ``outputs`` (the first trace's, or the replay's) with ``expected`` (the second's)."""
    by_role = {role: (fmt, array) for role, fmt, array in outputs}
    first: tuple | None = None
    differing = total = 0
    max_ulp: int | None = None
    for role, fmt, want in expected:
        total += want.size
        got_fmt, got = by_role.get(role, (None, None))
        if got is None or got_fmt != fmt or got.shape != want.shape:
            differing += want.size
            if first is None:
                shape = "no such output" if got is None else f"{got_fmt} {tuple(got.shape)}"
                first = (role, fmt, want.shape, [],
                         f"output {role}: {shape} compared with B's {fmt} {tuple(want.shape)}")
            continue
        mask, distances = _mismatch(got, want, fmt, nan)
        count = int(np.count_nonzero(mask))
        if not count:
            continue
        differing += count
        if distances is not None:
            finite = distances[mask & (distances >= 0)]
            if finite.size:
                max_ulp = max(max_ulp or 0, int(finite.max()))
        if first is None:
            rows = []
            for index in np.argwhere(mask)[:max_rows]:
                index = tuple(int(i) for i in index)
                ulp = None if distances is None or distances[index] < 0 else int(distances[index])
                rows.append(ElementDiff(index, got[index], want[index], ulp))
            first = (role, fmt, want.shape, rows, "")
    if first is None:
        return None
    role, fmt, shape, rows, note = first
    return OpDiff(op, other, role, fmt, tuple(shape), rows, differing, total, max_ulp,
                  _inputs_identical(op, other), note)


# --- the two comparisons --------------------------------------------------------------------


def _structure(values: list[Value]) -> list[tuple]:
    return [(role, fmt, tuple(array.shape)) for role, fmt, array in values]


def check_same_program(a: Trace, b: Trace) -> None:
    """Raise :class:`TraceMismatch` naming the first position where the traces' op lists differ
    (op name, or the roles, formats and shapes of its inputs and outputs)."""
    for op, other in zip(a.ops, b.ops):
        if op.name != other.name:
            raise TraceMismatch(f"the op lists differ at op {op.step}: A has {op.name} [{op.where()}], "
                                f"B has {other.name} [{other.where()}]")
        for side in ("inputs", "outputs"):
            mine, theirs = _structure(getattr(op, side)), _structure(getattr(other, side))
            if mine != theirs:
                raise TraceMismatch(f"the op lists differ at op {op.step} {op.name}: its {side} are {mine} in A, "
                                    f"{theirs} in B")
    if len(a.ops) != len(b.ops):
        longer, name = (a, "A") if len(a.ops) > len(b.ops) else (b, "B")
        extra = longer.ops[min(len(a.ops), len(b.ops))]
        raise TraceMismatch(f"the op lists differ in length: A has {len(a.ops)} ops, B has {len(b.ops)}; "
                            f"{name} continues with {extra.label()}")


@dataclasses.dataclass
class Comparison:
    """The result of :func:`compare_traces` or :func:`replay_traces`."""

    a: Trace
    b: Trace
    divergent: list[OpDiff]
    nan: str
    machine: Machine | None = None  # the replay's
    not_replayed: list[tuple[TraceOp, str]] = dataclasses.field(default_factory=list)
    native: Counter = dataclasses.field(default_factory=Counter)  # replayed ops the emulator ran natively

    @property
    def replay(self) -> bool:
        """Whether the first trace's outputs were recomputed by the emulator."""
        return self.machine is not None

    @property
    def first(self) -> OpDiff | None:
        """The first divergent op (None: none diverges)."""
        return self.divergent[0] if self.divergent else None

    @property
    def first_local(self) -> OpDiff | None:
        """The first divergent op whose inputs are the same in both traces."""
        return next((diff for diff in self.divergent if diff.inputs_identical), None)

    @property
    def identical(self) -> bool:
        """No compared output differs."""
        return not self.divergent


def compare_traces(a: Trace, b: Trace, *, strict_nan: bool = False, max_rows: int = 3) -> Comparison:
    """Every op's outputs in ``a`` against the same op's in ``b`` (see the module doc)."""
    check_same_program(a, b)
    nan = "strict" if strict_nan else "class"
    divergent = [diff for op, other in zip(a.ops, b.ops)
                 if (diff := _diff_op(op, other, op.outputs, other.outputs, nan, max_rows)) is not None]
    return Comparison(a, b, divergent, nan)


def _resolve(name: str):
    namespace, *packet, overload = name.split(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), ".".join(packet)), overload)
    except (AttributeError, RuntimeError):
        return None


def randomness_switched_off(func, args: tuple | list, kwargs: dict) -> bool:
    """Whether a random op (torch's ``nondeterministic_seeded`` tag) draws nothing that shapes its
    result for these arguments, so that it can be recomputed: a ``dropout_p`` (attention) or an
    RNN's ``dropout`` of 0, a ``train``/``training`` of False (dropout, RNNs, ``rrelu_with_noise``),
    or a dropout's ``p`` of 0.

    >>> aten = torch.ops.aten
    >>> x = torch.ones(2)
    >>> [randomness_switched_off(aten.native_dropout.default, (x, 0.5, False), {}),
    ...  randomness_switched_off(aten.native_dropout.default, (x, 0.5, True), {}),
    ...  randomness_switched_off(aten.bernoulli.p, (x, 0.0), {})]
    [True, False, False]
    """
    schema = func._schema.arguments
    bound = {argument.name: argument.default_value for argument in schema if argument.has_default_value()}
    bound.update({argument.name: value for argument, value in zip(schema, args)})
    bound.update(kwargs)
    name = func.overloadpacket.__name__
    if "dropout_p" in bound:
        return _is_zero(bound["dropout_p"])
    if any(bound.get(flag) is False for flag in ("train", "training")):
        return True
    if "dropout" in bound and _is_zero(bound["dropout"]):
        return True
    return "dropout" in name and _is_zero(bound.get("p"))


def _is_zero(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def replay_op(op: TraceOp, mode: EmulationMode) -> list[Value] | str:
    """The outputs of ``op`` recomputed under ``mode`` from its recorded inputs, as trace values;
    or, when the op cannot be recomputed, the reason (a string)."""
    func = _resolve(op.name)
    if func is None:
        return "an op this torch does not have"
    if func.overloadpacket.__name__ in UNINITIALIZED:
        return "uninitialized memory"
    seeded = torch.Tag.nondeterministic_seeded in func.tags
    tensors = {role: tensor_from_value(fmt, array) for role, fmt, array in op.inputs}
    try:
        args = decode(op.attrs.get("args", []), tensors)
        kwargs = {name: decode(value, tensors) for name, value in op.attrs.get("kwargs", {}).items()}
    except NotReplayable as error:
        return "random numbers" if seeded else str(error)
    if seeded and not randomness_switched_off(func, args, kwargs):
        return "random numbers"
    with torch.no_grad(), mode:
        result = func(*args, **kwargs)
    outputs: list[Value] = []
    encode(result, "out", outputs)
    return outputs


def machine_from_settings(settings: dict[str, Any], **options: Any) -> Machine:
    """The machine a trace was recorded under (``settings["machine"]``; the defaults for a
    native trace), with ``options`` (rounding, accumulate, order, nan, ftz, seed, tensor_core)
    given explicitly taking precedence (None: not given)."""
    stored = dict(settings.get("machine") or {})
    stored.pop("strict", None)
    if isinstance(stored.get("tensor_core"), list):
        stored["tensor_core"] = TensorCore(*stored["tensor_core"])
    stored.update({name: value for name, value in options.items() if value is not None})
    return Machine(**stored)


def replay_traces(a: Trace, b: Trace, machine: Machine, *, strict_nan: bool = False, max_rows: int = 3
                  ) -> Comparison:
    """Every op of ``a`` recomputed on the emulator under ``machine`` from ``a``'s recorded inputs,
    compared with ``b``'s outputs of that op (``b`` may be ``a`` itself: every op of one run
    judged on its own inputs). Ops that cannot be recomputed (random numbers, uninitialized
    memory, arguments without recorded values) are listed in ``not_replayed``; ops the emulator
    does not implement run natively and are counted in ``native``."""
    check_same_program(a, b)
    nan = "strict" if strict_nan else "class"
    mode = EmulationMode(machine, strict=False)
    divergent, not_replayed = [], []
    for op, other in zip(a.ops, b.ops):
        replayed = replay_op(op, mode)
        if isinstance(replayed, str):
            not_replayed.append((op, replayed))
            continue
        diff = _diff_op(op, other, replayed, other.outputs, nan, max_rows)
        if diff is not None:
            divergent.append(diff)
    return Comparison(a, b, divergent, nan, machine, not_replayed, Counter(mode.fallbacks))


# --- the report -----------------------------------------------------------------------------


def _describe_diff(diff: OpDiff, first_name: str) -> list[str]:
    lines = [f"{diff.op.label()}, output {diff.role} ({diff.fmt}, shape {diff.shape})"]
    if diff.note:
        lines.append(f"  {diff.note}")
    for element in diff.elements:
        where = f"element {element.index}" if element.index else "the value"
        distance = f"; {element.ulp} ulp apart" if element.ulp is not None else (
            "; a NaN: no ulp distance" if diff.fmt in _SF_FORMATS or diff.fmt == "fp64" else "")
        lines.append(f"  {where}: {first_name} {show_value(element.a, diff.fmt)}, B {show_value(element.b, diff.fmt)}"
                     f"{distance}")
    largest = "" if diff.max_ulp is None else f", max {diff.max_ulp} ulp"
    lines.append(f"  in this op: {diff.differing} of {diff.total} output elements differ{largest}")
    return lines


def format_comparison(result: Comparison, names: tuple[str, str] = ("A", "B")) -> str:
    """The comparison as text: both traces, what was compared, the first divergent op (module
    path, op, output, element index, both values in hex and decimal, ulp distance, count of
    differing elements) and whether it is local or inherited."""
    lines = [f"A: {names[0]}: {result.a.describe()}", f"B: {names[1]}: {result.b.describe()}"]
    nan = "NaNs bit for bit" if result.nan == "strict" else "NaNs by class (quiet/signaling)"
    total = len(result.a.ops)
    if result.replay:
        lines.append(f"replay: each op of A recomputed by the emulator ({result.machine!r}) from A's recorded "
                     f"inputs, compared with B's outputs; {nan}")
        if result.not_replayed:
            reasons = Counter(reason for _, reason in result.not_replayed)
            lines.append(f"not replayed: {len(result.not_replayed)} ops (" +
                         "; ".join(f"{reason}: {count}" for reason, count in reasons.most_common()) + ")")
        if result.native:
            lines.append("replayed natively (not emulated): " +
                         ", ".join(f"{name} x{count}" for name, count in result.native.most_common()))
    else:
        lines.append(f"compared: the outputs of {total} ops, element by element; {nan}")
    first = result.first
    if first is None:
        lines.append("no divergence: every compared output is identical")
        return "\n".join(lines)
    first_name = "replayed" if result.replay else "A"
    lines.append("first divergence: " + "\n".join(_describe_diff(first, first_name)))
    if first.inputs_identical:
        lines.append("  its inputs are bit-identical in A and B: the divergence is local to this op")
    else:
        lines.append("  its inputs already differ between A and B (values from outside the trace, or from ops not "
                     "compared): the divergence is inherited")
    local = [diff for diff in result.divergent if diff.inputs_identical]
    lines.append(f"divergent ops: {len(result.divergent)} of {total} "
                 f"({len(local)} with bit-identical inputs in A and B: local; "
                 f"{len(result.divergent) - len(local)} with differing inputs: inherited)")
    first_local = result.first_local
    if first_local is not None and first_local is not first:
        lines.append("first local divergence: " + "\n".join(_describe_diff(first_local, first_name)))
    return "\n".join(lines)
