"""The floating-point range factories: ``arange``, ``linspace`` and ``logspace``.

Each is written as torch 2.13's CPU kernel computes it (x86-64: the AVX2 kernels, which torch also
runs on AVX-512 machines): torch computes the size and checks the arguments, the mode the values.
Where torch's kernel rounds into FP16/BF16 between steps (linspace) the mode rounds there too. The
double-precision steps of ``arange``/``logspace`` for FP32 (torch computes them in double on the
host) are host IEEE doubles, as in torch. docs/torch.md lists what is computed and the measured
differences.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

import softfloat16 as sf
from softfloat16.formats import Format

from .machine import FP32, Machine, scalar_bits
from .operands import fill_bits, is_scalar
from .registry import NotEmulated, aten_arg, implements
from .steps import Steps, ieee_16_or_32
from .tensors import DTYPE_FORMATS, INTEGER_VIEWS, is_emulated

__all__ = ["arange", "linspace", "logspace"]

_LANES = {4: 8, 2: 16}  # torch's AVX2 Vectorized<float> / Vectorized<Half, BFloat16> widths


def _scalar_value(value, what: str):
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise NotEmulated(f"{what}: a tensor of shape {tuple(value.shape)}")
        value = value.item()
    if not is_scalar(value):
        raise TypeError(f"{what}: expected a real number, got {value!r}")
    return value


def _fma64(a: float, b: int, c: float) -> float:
    """``a * b + c`` in double with one rounding (torch's contracted double expression): exact
    rational arithmetic, rounded to nearest even by Python's int division."""
    return float(Fraction(a) * b + Fraction(c))


def _to_fp32(machine: Machine, values: np.ndarray, final: bool) -> np.ndarray:
    """Doubles rounded into FP32 by the machine (RNE steps; the final rounding may be stochastic)."""
    return np.asarray(FP32.from_float(np.asarray(values, np.float64), **(machine.final() if final else machine.step)))


def _integers(machine: Machine, integers: np.ndarray, fmt: Format) -> np.ndarray:
    """int64 values converted as ``static_cast<float>`` (and then to ``fmt``) converts them."""
    wide = np.asarray(FP32.from_float(integers.astype(np.int64), **machine.step))
    return wide if fmt is FP32 else np.asarray(sf.convert(wide, src=FP32, dst=fmt, **machine.step))


def _write(result: torch.Tensor, patterns: np.ndarray) -> torch.Tensor:
    fmt = DTYPE_FORMATS[result.dtype]
    signed = np.asarray(patterns, dtype=fmt.dtype).view({1: np.uint8, 2: np.int16, 4: np.int32}[fmt.width // 8])
    result.view(INTEGER_VIEWS[result.element_size()]).copy_(torch.from_numpy(np.ascontiguousarray(signed))
                                                             .reshape(result.shape))
    return result


def _arange_values(machine: Machine, start, step, count: int, fmt: Format) -> np.ndarray:
    """torch CPU's ``arange`` kernel: its vectorised loop (two vectors of ``L`` lanes per iteration)
    fills each vector from ``base = start + step * i`` as ``base + j * step``; the last
    ``count % (2 L)`` elements are ``start + step * i`` one by one."""
    lanes = _LANES.get(fmt.width // 8, 8)
    index = np.arange(count, dtype=np.int64)
    vectorised = count - count % (2 * lanes)
    chunk, lane = index - index % lanes, index % lanes
    if fmt is FP32:  # in double (torch's accumulate type for float); the scalar expression is one fma
        start, step = float(start), float(step)
        bases = np.array([_fma64(step, c, start) for c in range(0, vectorised, lanes)], dtype=np.float64)
        base32 = _to_fp32(machine, bases, final=False)[index[:vectorised] // lanes]
        with np.errstate(over="ignore", invalid="ignore"):
            lanes_value = FP32.to_float(base32) + lane[:vectorised].astype(np.float64) * step
        tail = np.array([_fma64(step, int(i), start) for i in index[vectorised:]], dtype=np.float64)
        return _to_fp32(machine, np.concatenate([lanes_value, tail]), final=True)
    start32, step32 = scalar_bits(start, FP32, machine.nan), scalar_bits(step, FP32, machine.nan)
    base = machine.widen(machine.narrow(machine.fma(step32, _integers(machine, chunk, FP32), start32), fmt), fmt)
    in_vector = machine.add(base, machine.mul(_integers(machine, lane, FP32), step32))
    one_by_one = machine.fma(step32, _integers(machine, index, FP32), start32)
    return machine.narrow(np.where(index < vectorised, in_vector, one_by_one), fmt)


@implements("arange", inplace=False)
def arange(machine, func, args, kwargs):
    """``arange`` in a floating dtype: torch computes the size and checks the arguments, then the
    values are torch CPU's: FP16/BF16 ``start + step * i`` (start, step as FP32 numbers; one FP32
    fma, rounded into the format, for the first element of each vector of 16 and the elements after
    the last pair of vectors; the others ``base + j * step`` from that rounded first element, FP32
    steps, one rounding); FP32 the same with double steps (``fma(step, i, start)`` exactly rounded to
    double, vectors of 8) rounded into FP32."""
    result = func(*args, **kwargs)
    if not is_emulated(result.dtype) or result.numel() == 0:
        return result
    fmt = ieee_16_or_32(func, DTYPE_FORMATS[result.dtype])
    name = func._overloadname
    if name == "default":
        start, step = 0, 1
    elif name == "start":
        start, step = args[0], 1
    elif name == "start_step":
        start, step = args[0], aten_arg(args, kwargs, 2, "step", 1)
    else:
        raise NotEmulated(f"{func}")
    start, step = _scalar_value(start, f"{func}: start"), _scalar_value(step, f"{func}: step")
    return _write(result, _arange_values(machine, start, step, result.numel(), fmt))


def _range_arguments(func, args, kwargs):
    start = _scalar_value(aten_arg(args, kwargs, 0, "start"), f"{func}: start")
    end = _scalar_value(aten_arg(args, kwargs, 1, "end"), f"{func}: end")
    return start, end, int(aten_arg(args, kwargs, 2, "steps"))


@implements("linspace", inplace=False)
def linspace(machine, func, args, kwargs):
    """``linspace`` in a floating dtype, torch CPU's kernel: start and end converted to the dtype,
    ``step = (end - start) / (steps - 1)``, ``start + step * i`` for the first ``steps // 2``
    elements and ``end - step * (steps - 1 - i)`` for the rest. FP32: each half one fma; FP16/BF16:
    every operation in the format (the index too is converted to it), as torch's ``Half``
    arithmetic rounds. ``steps == 1`` gives ``start``."""
    result = func(*args, **kwargs)
    if not is_emulated(result.dtype) or result.numel() == 0:
        return result
    fmt = ieee_16_or_32(func, DTYPE_FORMATS[result.dtype])
    start, end, steps = _range_arguments(func, args, kwargs)
    first, last = scalar_bits(start, fmt, machine.nan), scalar_bits(end, fmt, machine.nan)
    if steps == 1:
        return fill_bits(result, first)
    index = np.arange(steps, dtype=np.int64)
    lower = index < steps // 2
    if fmt is FP32:
        step = machine.div(machine.sub(last, first), _integers(machine, np.int64(steps - 1), FP32))
        values = np.where(lower, machine.fma(step, _integers(machine, index, FP32), first),
                          machine.fma(machine.neg(step), _integers(machine, steps - 1 - index, FP32), last))
        return _write(result, values)
    arithmetic = Steps(machine, fmt)
    step = arithmetic.div(arithmetic.sub(last, first), _integers(machine, np.int64(steps - 1), fmt))
    up = fmt.mul(step, _integers(machine, index, fmt), **machine.step)
    down = fmt.mul(step, _integers(machine, steps - 1 - index, fmt), **machine.step)
    return _write(result, np.where(lower, arithmetic.add(first, up), arithmetic.sub(last, down)))


@implements("logspace", inplace=False)
def logspace(machine, func, args, kwargs):
    """``logspace`` in a floating dtype, torch CPU's loop: start and end converted to the dtype, their
    difference in the dtype, then in double on the host ``step = difference / (steps - 1)``,
    ``base ** (start + step * i)`` (first half) or ``base ** (end - step * (steps - 1 - i))`` (libm's
    ``pow``, as torch), converted as a float64 tensor is (through FP32). ``steps == 1``:
    ``base ** start`` in double."""
    result = func(*args, **kwargs)
    if not is_emulated(result.dtype) or result.numel() == 0:
        return result
    fmt = ieee_16_or_32(func, DTYPE_FORMATS[result.dtype])
    start, end, steps = _range_arguments(func, args, kwargs)
    base = float(_scalar_value(aten_arg(args, kwargs, 3, "base", 10.0), f"{func}: base"))
    with np.errstate(all="ignore"):
        if steps == 1:
            return fill_bits(result, scalar_bits(float(np.power(base, float(start))), fmt, machine.nan))
        first, last = scalar_bits(start, fmt, machine.nan), scalar_bits(end, fmt, machine.nan)
        difference = float(fmt.to_float(fmt.sub(last, first, **machine.step)))
        step = difference / (steps - 1)
        index = np.arange(steps, dtype=np.float64)
        exponent = np.where(index < steps // 2, float(fmt.to_float(first)) + step * index,
                            float(fmt.to_float(last)) - step * (steps - 1 - index))
        values = np.power(base, exponent)
    wide = _to_fp32(machine, values, final=fmt is FP32)
    return _write(result, wide if fmt is FP32 else machine.narrow(wide, fmt))
