"""Cumulative sums, products and log-sum-exps on the emulator: ``cumsum``, ``cumprod`` and
``logcumsumexp`` along any dimension, written as torch's CPU kernel computes them.

torch CPU (``cpu_cum_base_kernel``) walks each line along ``dim`` with one accumulator of
``acc_type``: FP32 for float16/bfloat16 inputs (one emulated FP32 step per element, from +0 or 1),
and a **double** for float32 inputs; every element's output is the accumulator rounded once into
the result's dtype. The input is first converted to the result's dtype (``dtype=``, as
``self.to(result dtype)``; integer and boolean inputs without ``dtype=`` give int64, native).

The double accumulator of FP32 inputs is the host's IEEE double (numpy float64, round to nearest
even: bit-defined on every machine); its rounding into FP32 follows the machine's rounding. The
machine's ``accumulate`` and ``order`` (which govern matmuls and ``sum``) do not apply: these
kernels have their own accumulator and order.

``logcumsumexp`` walks each line the same way with torch's ``_log_add_exp_helper(x, running)``
from -inf, in FP32 steps with the emulated FP32 ``exp`` and ``log1p`` (:func:`log_add_exp32`);
torch uses libm's (and, for FP32 inputs, a double accumulator), so the two agree within their
last bits, not bit for bit (docs/torch.md has the measured share).
"""
from __future__ import annotations

import numpy as np
import torch

from .activations import exp32
from .log1p import log1p32
from .machine import FP32, Machine
from .operands import meta_call
from .opmath import ARITHMETIC, result32, widen32
from .registry import NotEmulated, aten_arg, implements
from .tensors import bits, from_bits, is_emulated

__all__ = ["cumulative32", "log_add_exp32"]

_ONE32 = np.uint32(0x3F800000)
_MINUS_INF32 = np.uint32(0xFF800000)


def _lines(array: np.ndarray, dim: int) -> tuple[np.ndarray, tuple]:
    """``array`` with ``dim`` moved last and the rest flattened: (lines, the moved shape)."""
    moved = np.moveaxis(array, dim, -1)
    return moved.reshape(-1, moved.shape[-1]), moved.shape


def cumulative32(machine: Machine, lines32: np.ndarray, product: bool) -> np.ndarray:
    """Running FP32 sums (or products) of each row of an (m, n) array of FP32 patterns: one
    emulated FP32 step per element, from +0 (or 1); every prefix kept.

    >>> m = Machine()
    >>> rows = np.array([[0x3F800000, 0x33800000, 0x33800000]], np.uint32)   # 1, 2**-24, 2**-24
    >>> [hex(int(v)) for v in cumulative32(m, rows, product=False)[0]]     # ties to even: 1 each time
    ['0x3f800000', '0x3f800000', '0x3f800000']
    """
    out = np.empty(lines32.shape, np.uint32)
    acc = np.full(lines32.shape[0], _ONE32 if product else np.uint32(0), np.uint32)
    for column in range(lines32.shape[1]):
        acc = np.asarray((machine.mul if product else machine.add)(acc, lines32[:, column]), np.uint32)
        out[:, column] = acc
    return out


def _cumulative64(machine: Machine, lines32: np.ndarray, product: bool) -> np.ndarray:
    """The FP32 kernel: running sums (products) in IEEE double, each rounded into FP32 by the machine."""
    values = np.asarray(FP32.to_float(lines32), np.float64)
    with np.errstate(all="ignore"):
        running = (np.multiply if product else np.add).accumulate(values, axis=1)
    return np.asarray(FP32.from_float(running, **machine.final()), np.uint32)


def _result(func, args, kwargs) -> torch.Tensor | None:
    """torch's result (a meta tensor: its dtype, and torch's checks of the arguments), or None where
    the op runs natively (a dtype the mode does not emulate)."""
    out = meta_call(func, args, kwargs)
    if not is_emulated(out.dtype):
        return None
    if out.dtype not in ARITHMETIC:
        raise NotEmulated(f"{func} of {out.dtype} (torch CPU has no such kernel)")
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: only the default overload is emulated")
    return out


@implements("cumsum", "cumprod")
def cumulative(machine, func, args, kwargs):
    """``cumsum`` / ``cumprod`` (``dim``, ``dtype=``): torch CPU's accumulator per line, one rounding
    per output element (module docstring)."""
    self, dim = args[0], aten_arg(args, kwargs, 1, "dim")
    out = _result(func, args, kwargs)
    if out is None:
        return func(*args, **kwargs)
    source = self if self.dtype == out.dtype else machine.convert(self, out.dtype)
    if source.dim() == 0 or source.numel() == 0:
        return from_bits(bits(source), out.dtype, out.shape)
    dim = dim % source.dim()
    wide = widen32(machine, source, str(func), "self")
    lines, moved = _lines(wide, dim)
    product = func.overloadpacket.__name__.startswith("cumprod")
    if out.dtype == torch.float32:
        running = _cumulative64(machine, lines, product)
        result = from_bits(np.moveaxis(running.reshape(moved), -1, dim), out.dtype, out.shape)
    else:
        running = cumulative32(machine, lines, product)
        result = result32(machine, np.moveaxis(running.reshape(moved), -1, dim), out.dtype, out.shape)
    return result


def log_add_exp32(machine: Machine, x, running):
    """torch's ``_log_add_exp_helper(x, running)`` on FP32 patterns: ``low``, ``high`` = the smaller
    and larger of the two (``running`` where it is a NaN, ``x`` where ``x`` is; ``std::min`` and
    ``std::max``), then ``log1p(exp(low - high)) + high`` in FP32 steps (the emulated exp and log1p),
    or ``x`` where ``low == high`` is infinite.

    >>> m = Machine()
    >>> hex(int(log_add_exp32(m, np.uint32(0), np.uint32(0))))   # log(e**0 + e**0) = log 2
    '0x3f317218'
    """
    x, running = np.asarray(x, np.uint32), np.asarray(running, np.uint32)
    nan = FP32.is_nan(running)
    low = np.where(nan | FP32.lt(running, x), running, x)
    high = np.where(nan | FP32.lt(x, running), running, x)
    value = machine.add(log1p32(machine, exp32(machine, machine.sub(low, high))), high)
    both_infinite = FP32.eq(low, high) & ~FP32.is_finite(low)
    return np.where(both_infinite, x, value).astype(np.uint32)


@implements("logcumsumexp", "_logcumsumexp", inplace=False)
def logcumsumexp(machine, func, args, kwargs):
    """``log(sum(exp(x)))`` of every prefix along ``dim``: torch CPU's walk from -inf, one
    :func:`log_add_exp32` per element in FP32 steps (the emulated exp and log1p), each output the
    running FP32 value rounded once into the tensor's format."""
    self, dim = args[0], aten_arg(args, kwargs, 1, "dim")
    out = _result(func, args, kwargs)
    if out is None:
        return func(*args, **kwargs)
    if self.numel() == 0:
        return from_bits(bits(self), out.dtype, out.shape)
    wide = widen32(machine, self, str(func), "self").reshape(tuple(self.shape) or (1,))
    lines, moved = _lines(wide, dim % wide.ndim)
    running = np.full(lines.shape[0], _MINUS_INF32, np.uint32)
    results = np.empty(lines.shape, np.uint32)
    for column in range(lines.shape[1]):
        running = log_add_exp32(machine, lines[:, column], running)
        results[:, column] = running
    results = np.moveaxis(results.reshape(moved), -1, dim % wide.ndim)
    return result32(machine, results, out.dtype, out.shape)
