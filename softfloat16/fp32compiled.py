"""The step programs of :mod:`softfloat16.fp32math` run as one compiled call each.

A step program (``exp_steps(x, ops)`` and the others) is written once against an
:class:`~softfloat16.fp32ops.Fp32Arithmetic`. :func:`compiled` runs it once on a :class:`Tracer`,
whose values, integers and truth values are symbolic: each operation, and each integer operator
(``+ - >> << & | ^ ~ == != < <= > >=``) applied to a symbolic integer, appends one instruction to a
straight-line program. The programs have no control flow of their own on the data (``ops.where``
selects), and the tracer makes sure of it: a symbolic value used as a Python truth value, an
index or a number raises :class:`TracingError`, and so does mixing values with integers. The
program (dead instructions dropped, registers reused after their last use) is then run by the
one compiled interpreter of ``softfloat16._kernels.programs``: per block of elements, each
instruction is one of the core's loops (fast kernel, general kernel where it declines) with the
options ``sf.fp32.add`` and friends have by default. So the compiled program and the program
driven by :data:`~softfloat16.fp32ops.EMULATED` compute the same operations on the same bits, and
tests/test_fp32_compiled.py checks that they agree bit for bit.

A program may also take the torch mode's machine steps (``steps``, an :class:`Fp32Arithmetic` of
``STEP_*`` instructions with run-time options): softmax's subtraction fused with its exp, sigmoid's
``1 / (1 + exp(-x))``.
"""
from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

import softfloat16 as sf

from . import threads
from ._kernels import programs as kernels
from .ops import _config

__all__ = ["CompiledProgram", "MachineSteps", "TracingError", "Tracer", "compiled", "step_options", "trace"]

_FP32 = sf.fp32
VALUE, INTEGER, TRUTH = "an FP32 value", "an integer", "a truth value"


class TracingError(TypeError):
    """A step program did something a straight-line program cannot record."""


class _Node:
    """A symbolic value, integer or truth value of a trace (``kind``), the result of instruction
    ``index`` of ``trace``. The integer operators record instructions; nothing else is allowed."""

    __slots__ = ("trace", "index", "kind")
    __array_ufunc__ = None  # numpy scalars on the left defer to the reflected operators below
    __hash__ = None

    def __init__(self, trace: Tracer, index: int, kind: str) -> None:
        self.trace, self.index, self.kind = trace, index, kind

    def __bool__(self):
        raise TracingError("a step program used a symbolic value as a truth value (data-dependent control flow, "
                           "e.g. `if` on an element): select with ops.where instead")

    def __index__(self):
        raise TracingError("a step program used a symbolic value as a Python integer (an index, a shift of a "
                           "Python object, int())")

    __int__ = __float__ = __index__

    def __array__(self, *args, **kwargs):
        raise TracingError("a step program turned a symbolic value into a numpy array: use the ops of its "
                           "Fp32Arithmetic")

    def _binary(self, opcode: int, other, kind: str | None = None, swap: bool = False):
        a, b = self.trace._integer(self), self.trace._integer(other)
        if swap:
            a, b = b, a
        other_truth = other.kind == TRUTH if isinstance(other, _Node) else isinstance(other, (bool, np.bool_))
        logical = opcode in _LOGICAL and self.kind == TRUTH and other_truth  # numpy's & | ^ of booleans
        return self.trace._emit(opcode, kind or (TRUTH if logical else INTEGER), a, b)

    def __add__(self, other):
        return self._binary(kernels.IADD, other)

    def __radd__(self, other):
        return self._binary(kernels.IADD, other, swap=True)

    def __sub__(self, other):
        return self._binary(kernels.ISUB, other)

    def __rsub__(self, other):
        return self._binary(kernels.ISUB, other, swap=True)

    def __rshift__(self, other):
        return self._binary(kernels.SHR, other)

    def __rrshift__(self, other):
        return self._binary(kernels.SHR, other, swap=True)

    def __lshift__(self, other):
        return self._binary(kernels.SHL, other)

    def __rlshift__(self, other):
        return self._binary(kernels.SHL, other, swap=True)

    def __and__(self, other):
        return self._binary(kernels.AND, other)

    __rand__ = __and__

    def __or__(self, other):
        return self._binary(kernels.OR, other)

    __ror__ = __or__

    def __xor__(self, other):
        return self._binary(kernels.XOR, other)

    __rxor__ = __xor__

    def __invert__(self):
        if self.kind == TRUTH:  # numpy's ~ on booleans
            return self.trace._emit(kernels.NOT, TRUTH, self.index)
        return self.trace._emit(kernels.INOT, INTEGER, self.trace._integer(self))

    def __neg__(self):
        return self._binary(kernels.ISUB, 0, swap=True)

    def __eq__(self, other):
        return self._binary(kernels.IEQ, other, TRUTH)

    def __ne__(self, other):
        return self._binary(kernels.INE, other, TRUTH)

    def __lt__(self, other):
        return self._binary(kernels.ILT, other, TRUTH)

    def __le__(self, other):
        return self._binary(kernels.ILE, other, TRUTH)

    def __gt__(self, other):
        return self._binary(kernels.ILT, other, TRUTH, swap=True)

    def __ge__(self, other):
        return self._binary(kernels.ILE, other, TRUTH, swap=True)


_LOGICAL = (kernels.AND, kernels.OR, kernels.XOR)


class Tracer:
    """An :class:`~softfloat16.fp32ops.Fp32Arithmetic` that records a step program.

    >>> from softfloat16.fp32math import exp_steps
    >>> tracer = Tracer()
    >>> result = exp_steps(tracer.input(), tracer)
    >>> len(tracer.instructions) > 20
    True
    """

    def __init__(self) -> None:
        self.instructions: list[tuple[int, int, tuple[int, ...]]] = []  # (opcode, node, operand nodes)
        self.constants: dict[int, int] = {}  # value -> node
        self.constant_of: dict[int, int] = {}  # node -> value
        self.inputs: list[int] = []
        self._count = 0

    def _node(self) -> int:
        self._count += 1
        return self._count - 1

    def _emit(self, opcode: int, kind: str, *operands: int) -> _Node:
        node = self._node()
        self.instructions.append((opcode, node, operands))
        return _Node(self, node, kind)

    def _constant(self, value: int) -> int:
        value = int(value)
        if value not in self.constants:
            node = self._node()
            self.constants[value], self.constant_of[node] = node, value
        return self.constants[value]

    def _own(self, node: _Node) -> int:
        if node.trace is not self:
            raise TracingError("a step program mixed symbolic values of two traces")
        return node.index

    def _integer(self, operand) -> int:
        """The node of an integer (or truth value) operand: a symbolic one, or a Python / numpy integer."""
        if isinstance(operand, _Node):
            if operand.kind == VALUE:
                raise TracingError("a step program applied an integer operator to an FP32 value: take ops.bits first")
            return self._own(operand)
        if isinstance(operand, (bool, np.bool_, int, np.integer)):
            return self._constant(int(operand))
        raise TracingError(f"a step program combined a symbolic integer with {type(operand).__name__} {operand!r}")

    def _value(self, operand) -> int:
        if not isinstance(operand, _Node) or operand.kind != VALUE:
            what = operand.kind if isinstance(operand, _Node) else type(operand).__name__
            raise TracingError(f"a step program passed {what} where an FP32 value is expected (ops.const makes one)")
        return self._own(operand)

    def _truth(self, operand) -> int:
        if not isinstance(operand, _Node) or operand.kind != TRUTH:
            what = operand.kind if isinstance(operand, _Node) else type(operand).__name__
            raise TracingError(f"a step program passed {what} where a truth value (a mask) is expected")
        return self._own(operand)

    def input(self) -> _Node:
        """The next input of the program (FP32 patterns)."""
        node = self._node()
        self.instructions.append((kernels.LOAD, node, ()))
        self.inputs.append(node)
        return _Node(self, node, VALUE)

    # -- the Fp32Arithmetic protocol -------------------------------------------------------------
    def const(self, bits: Any) -> _Node:
        return _Node(self, self._constant(int(bits)), VALUE)

    def _arith(self, opcode: int, *operands) -> _Node:
        return self._emit(opcode, VALUE, *(self._value(v) for v in operands))

    def add(self, a, b):
        return self._arith(kernels.ADD, a, b)

    def sub(self, a, b):
        return self._arith(kernels.SUB, a, b)

    def mul(self, a, b):
        return self._arith(kernels.MUL, a, b)

    def div(self, a, b):
        return self._arith(kernels.DIV, a, b)

    def fma(self, a, b, c):
        return self._arith(kernels.FMA, a, b, c)

    def neg(self, a):
        return self._arith(kernels.NEG, a)

    def lt(self, a, b):
        return self._emit(kernels.LT, TRUTH, self._value(a), self._value(b))

    def isnan(self, a):
        return self._emit(kernels.ISNAN, TRUTH, self._value(a))

    def where(self, mask, a, b):
        mask = self._truth(mask)
        if isinstance(a, _Node) and a.kind == VALUE or isinstance(b, _Node) and b.kind == VALUE:
            return self._emit(kernels.WHERE, VALUE, mask, self._value(a), self._value(b))
        a, b = self._integer(a), self._integer(b)
        return self._emit(kernels.WHERE, INTEGER, mask, a, b)

    def bits(self, a):
        return _Node(self, self._value(a), INTEGER)  # the same register, read as an integer

    def from_bits(self, bits):
        return self._emit(kernels.FROM_BITS, VALUE, self._integer(bits))

    def from_int(self, integers):
        return self._emit(kernels.FROM_INT, VALUE, self._integer(integers))


class MachineSteps:
    """The torch mode's machine steps (``Machine.add`` ... with its options) inside a traced program:
    ``STEP_*`` instructions, run with the options record the compiled program is called with."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def add(self, a, b):
        return self.tracer._arith(kernels.STEP_ADD, a, b)

    def sub(self, a, b):
        return self.tracer._arith(kernels.STEP_SUB, a, b)

    def mul(self, a, b):
        return self.tracer._arith(kernels.STEP_MUL, a, b)

    def div(self, a, b):
        return self.tracer._arith(kernels.STEP_DIV, a, b)

    def fma(self, a, b, c):
        return self.tracer._arith(kernels.STEP_FMA, a, b, c)


def trace(program: Callable, inputs: int, steps: bool = False) -> tuple[Tracer, int]:
    """(the tracer, the result's node) of ``program(x[, y], ops[, steps])`` on symbolic inputs."""
    tracer = Tracer()
    arguments = [tracer.input() for _ in range(inputs)] + [tracer] + ([MachineSteps(tracer)] if steps else [])
    result = program(*arguments)
    return tracer, tracer._value(result)


class CompiledProgram:
    """A step program as instruction tables for ``softfloat16._kernels.programs.run``; calling it
    runs the program elementwise over FP32 patterns (numpy broadcasting)."""

    def __init__(self, name: str, program: Callable, inputs: int, steps: bool = False) -> None:
        if inputs < 1:
            raise ValueError(f"inputs: a program takes at least one input, got {inputs!r}")
        self.name, self.inputs, self.steps = name, inputs, steps
        tracer, result = trace(program, inputs, steps)
        self.code, self.constants, self.registers = _allocate(tracer, result)

    def __repr__(self) -> str:
        return f"<CompiledProgram {self.name}: {len(self.code)} instructions, {self.registers} registers>"

    def __call__(self, *operands, step_options=None) -> np.ndarray:
        """The program on ``operands`` (uint32 arrays of FP32 patterns), as a uint32 array of their
        broadcast shape. ``step_options``: the machine steps' options (``ops._config(sf.fp32, ...)``),
        for a program traced with ``steps`` only."""
        if len(operands) != self.inputs:
            raise TypeError(f"{self.name}: expected {self.inputs} operand(s), got {len(operands)}")
        if (step_options is None) == self.steps:
            raise TypeError(f"{self.name}: step_options is needed exactly by a program with machine steps")
        settings = _DEFAULT_SETTINGS if step_options is None else _settings(step_options)
        arrays = [np.asarray(a) for a in operands]
        for i, a in enumerate(arrays):
            if a.dtype != np.uint32:
                raise TypeError(f"{self.name}: operand {i} must be uint32 FP32 patterns, got {a.dtype}")
        shape = arrays[0].shape
        if len(arrays) == 1:
            inputs = np.ascontiguousarray(arrays[0]).reshape(1, -1)
        else:
            shape = _broadcast_shape([a.shape for a in arrays])
            inputs = np.empty((len(arrays), math.prod(shape)), np.uint32)
            for row, a in zip(inputs, arrays):
                row.reshape(shape)[...] = a  # numpy's assignment broadcasts
        out = np.empty(inputs.shape[1], np.uint32)
        if out.size < threads.PARALLEL_MIN_ELEMENTS:
            kernels.run(self.code, self.constants, self.registers, inputs, out, settings)
        else:
            def work(start: int, stop: int) -> None:
                part = np.ascontiguousarray(inputs[:, start:stop])  # one layout, one compiled variant
                kernels.run(self.code, self.constants, self.registers, part, out[start:stop], settings)

            threads.run_split(out.size, work)
        return out.reshape(shape)


def _broadcast_shape(shapes: list[tuple]) -> tuple:
    """numpy's broadcast shape of ``shapes``; equal shapes, and two of one rank, without numpy's call
    (its cost is most of a small call's)."""
    first = shapes[0]
    if all(shape == first for shape in shapes):
        return first
    if len(shapes) == 2 and len(shapes[1]) == len(first):
        result = []
        for a, b in zip(first, shapes[1]):
            if a != b and a != 1 and b != 1:
                break
            result.append(a if b == 1 else b)
        else:
            return tuple(result)
    return np.broadcast_shapes(*shapes)


@functools.lru_cache(maxsize=64)
def _settings(step_options) -> np.ndarray:
    """The kernel's two rows of options: EMULATED's (sf.fp32's defaults), and the machine steps'."""
    if step_options.stochastic:
        raise ValueError("step_options: machine steps round to FP32 by a deterministic mode, not 'sr'")
    if (step_options.exponent_bits, step_options.fraction_bits) != (8, 23):
        raise ValueError("step_options: the options of FP32 operations (ops._config(sf.fp32, ...)) are needed")
    settings = np.array([_config(_FP32), step_options], np.int64)
    settings.flags.writeable = False
    return settings


_DEFAULT_SETTINGS = _settings(_config(_FP32))  # what sf.fp32.add & co. use by default: EMULATED's arithmetic


@functools.lru_cache(maxsize=256)
def step_options(**step):
    """The options record of FP32 operations with ``step``'s keywords (``rounding``, ``ftz``, ``nan``,
    as ``sf.fp32.add`` takes them): a program's machine steps, ``step_options=`` of a call.

    >>> step_options(rounding="rtz", nan="x86").rounding
    2
    """
    return _config(_FP32, **step)


def _allocate(tracer: Tracer, result: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(code, constants, register count): the live instructions of the trace (and a final STORE of
    ``result``), each node in a register, registers of dead nodes reused. An instruction's
    destination is never one of its operands' registers (the arithmetic reads its operands again
    for the elements the fast kernel declined)."""
    live = {result}
    kept = []
    for opcode, node, operands in reversed(tracer.instructions):
        if node in live or opcode == kernels.LOAD:
            kept.append((opcode, node, operands))
            live.update(operands)
    kept.reverse()
    last_use = {}
    for position, (_, _, operands) in enumerate(kept):
        for operand in operands:
            last_use[operand] = position
    last_use[result] = len(kept)
    register = {node: r for r, node in enumerate(sorted(tracer.constant_of))}  # constants: their own, for good
    free: list[int] = []
    count = len(register)
    code = []
    for position, (opcode, node, operands) in enumerate(kept):
        if free:
            register[node] = free.pop()
        else:
            register[node], count = count, count + 1
        for operand in set(operands):
            if last_use[operand] == position and operand not in tracer.constant_of:
                free.append(register[operand])
        if last_use.get(node, -1) < position:  # a LOAD of an unused input: its register is free again
            free.append(register[node])
        slots = [register[o] for o in operands] + [0] * (3 - len(operands))
        if opcode == kernels.LOAD:
            slots[0] = tracer.inputs.index(node)  # the input's number
        code.append((opcode, register[node], *slots))
    code.append((kernels.STORE, 0, register[result], 0, 0))
    constants = [(register[node], value) for node, value in tracer.constant_of.items()]
    return (np.array(code, np.int64).reshape(-1, 5), np.array(constants, np.int64).reshape(-1, 2), max(count, 1))


@functools.cache
def compiled(program: Callable) -> CompiledProgram:
    """The :class:`CompiledProgram` of a step program (traced once; remembered): a function of its
    inputs (one or two FP32 values), then ``ops`` and, if its last parameter is named ``steps``,
    the machine steps.

    >>> from softfloat16.fp32math import exp_steps
    >>> sf.hex(compiled(exp_steps)(np.array([0x3F800000], np.uint32))[0])  # e
    '0x402df854'
    """
    names = list(inspect.signature(program).parameters)
    steps = bool(names) and names[-1] == "steps"
    return CompiledProgram(getattr(program, "__name__", "program"), program, len(names) - 1 - int(steps), steps)
