"""Reductions: sum, mean, amax / amin (and max() / min() of a whole tensor).

Sums run in the machine's ``accumulate`` format and ``order`` over the reduced elements taken in
row-major order of the reduced dimensions, starting from +0 (:func:`row_sums`), then are rounded
once into the result's format. ``mean`` divides the FP32 sum by the count in one FP32 step and
rounds once (what torch 2.13 CPU does for half and bfloat16).
"""
from __future__ import annotations

import math

import numpy as np
import torch

import softfloat16 as sf
from softfloat16._kernels.reduce import row_extremes
from softfloat16.formats import Format

from .elementwise import maximum
from .machine import FP32, Machine
from .operands import Result, meta_call
from .registry import aten_arg, implements
from .tensors import DTYPE_FORMATS, bits, from_bits, is_emulated

__all__ = ["row_extreme", "row_sums"]


def row_sums(machine: Machine, patterns: np.ndarray, fmt: Format, accumulate: Format | None = None) -> np.ndarray:
    """FP32 patterns of the sums of each row of an (m, k) array of ``fmt`` patterns.

    The one place a sum is computed: ``sf.linalg.sum`` in the sequential and pairwise orders (the
    same trees as the matmul's), a matmul with a column of ones in the tensor-core order (blocks of
    exact products ``x * 1``). ``accumulate``: the machine's unless given (the FP32 steps inside
    softmax and friends accumulate in FP32).

    >>> m = Machine()
    >>> x = sf.fp16.from_float(np.array([[1.0, 2.0**-11, 2.0**-11]]))
    >>> sf.fp32.to_float(row_sums(m, x, sf.fp16))
    array([1.00097656])
    """
    accumulate = machine.accumulate if accumulate is None else accumulate
    rounding = machine.step["rounding"]
    if machine.order != "tensorcore":
        total = sf.linalg.sum(patterns, fmt, axis=1, accumulate=accumulate, out_format=FP32, order=machine.order,
                              rounding=rounding)
        return np.asarray(total).reshape(patterns.shape[0])
    ones = np.full((patterns.shape[1], 1), fmt.one, dtype=fmt.dtype)
    total = sf.linalg.matmul(patterns, ones, fmt, accumulate=accumulate, out_format=FP32, rounding=rounding,
                             **machine.gemm_policy(fmt))
    return np.asarray(total)[:, 0]


_NO_MASK = np.zeros((1, 1), np.bool_)


def row_extreme(machine: Machine, rows: np.ndarray, fmt: Format, largest: bool = True) -> np.ndarray:
    """The largest (smallest) pattern of each row of an (m, k) array, k >= 1: exact selection with
    ``-0 < +0`` (_kernels.reduce.row_extremes); a row holding a NaN gives the profile's NaN of its
    first NaN."""
    rows = np.ascontiguousarray(rows)
    result, first = np.empty(rows.shape[0], rows.dtype), np.empty(rows.shape[0], np.int64)
    if fmt.ieee_like:  # the NaNs: every magnitude above infinity's
        any_nan = row_extremes(rows, _NO_MASK, fmt.inf, fmt.signed, fmt.sign_mask, fmt.magnitude_mask, largest,
                               result, first)
    else:
        any_nan = row_extremes(rows, np.ascontiguousarray(fmt.is_nan(rows)), -1, fmt.signed, fmt.sign_mask,
                               fmt.magnitude_mask, largest, result, first)
    if any_nan:
        first_nan = rows[np.arange(rows.shape[0]), np.maximum(first, 0)]
        result = np.where(first >= 0, machine.propagate_nan(fmt, first_nan), result)
    return result


def _dims(x: torch.Tensor, dim) -> list[int]:
    """The reduced dimensions (an empty list or None: all of them, as torch's sum/amax read it)."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(x.dim()))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({d % max(x.dim(), 1) for d in dims})


def _rows(x: torch.Tensor, dims: list[int]) -> np.ndarray:
    """``x``'s patterns as an (m, k) array: kept dimensions first, reduced ones last."""
    order = [d for d in range(x.dim()) if d not in dims] + list(dims)
    moved = x.permute(*order) if order != list(range(x.dim())) else x  # (no view for trailing dims)
    return bits(moved).reshape(-1, math.prod(x.shape[d] for d in dims))


def _sum_args(func, args, kwargs):
    self = args[0]
    if func._overloadname == "default":  # sum(self, *, dtype)
        return self, None, False
    return self, aten_arg(args, kwargs, 1, "dim"), aten_arg(args, kwargs, 2, "keepdim", False)


def _reduced(func, args, kwargs, dim, keepdim: bool) -> Result:
    """dtype and shape of a reduction's result: computed directly for a floating ``self`` (meta
    tensors cost ~0.2 ms a call), torch's own answer otherwise."""
    self, dtype = args[0], kwargs.get("dtype")
    if not self.dtype.is_floating_point or (dtype is not None and not dtype.is_floating_point):
        out = meta_call(func, args, kwargs)
        return Result(out.dtype, out.shape)
    dims = _dims(self, dim)
    shape = [1 if d in dims else n for d, n in enumerate(self.shape)] if keepdim else [
        n for d, n in enumerate(self.shape) if d not in dims]
    return Result(dtype or self.dtype, torch.Size(shape))


def _sum32(machine: Machine, func, args, kwargs):
    """(result dtype and shape, FP32 sums, count) for sum and mean, or None when the result is not
    emulated."""
    self, dim, keepdim = _sum_args(func, args, kwargs)
    out = _reduced(func, args, kwargs, dim, keepdim)
    if not is_emulated(out.dtype):
        return None
    if self.dtype != out.dtype:  # sum(x_half, dtype=torch.float32): convert, then sum
        self = machine.convert(self, out.dtype)
    dims = _dims(self, dim)
    rows = _rows(self, dims)
    return out, row_sums(machine, rows, DTYPE_FORMATS[out.dtype]), rows.shape[1]


@implements("sum", inplace=False)
def sum_(machine, func, args, kwargs):
    """Sum in the accumulation format and order, one rounding into the result's format."""
    found = _sum32(machine, func, args, kwargs)
    if found is None:
        return func(*args, **kwargs)
    out, total, _ = found
    return from_bits(machine.narrow(total, DTYPE_FORMATS[out.dtype]), out.dtype, out.shape)


@implements("mean", inplace=False)
def mean(machine, func, args, kwargs):
    """The FP32 sum divided by the count in one FP32 step, then one rounding into the result's
    format (torch 2.13 CPU, measured: half and bfloat16 ``mean`` do not round the sum first)."""
    found = _sum32(machine, func, args, kwargs)
    if found is None:
        return func(*args, **kwargs)
    out, total, count = found
    quotient = machine.div(total, FP32.from_float(np.int64(count)))
    return from_bits(machine.narrow(quotient, DTYPE_FORMATS[out.dtype]), out.dtype, out.shape)


@implements("amax", "amin", "max", "min", inplace=False)
def amax(machine, func, args, kwargs):
    """Largest / smallest element (exact selection, ``-0 < +0``); a NaN anywhere gives the NaN
    profile's NaN of the first NaN in row-major order. ``max(a, b)`` is ``maximum``; ``max(x,
    dim)`` (values and indices) is native."""
    name = func.overloadpacket.__name__
    largest = name in ("amax", "max")
    if name in ("max", "min") and func._overloadname not in ("default",):
        if func._overloadname == "other":
            return maximum(machine, getattr(torch.ops.aten, "maximum" if largest else "minimum").default,
                           args, kwargs)
        return func(*args, **kwargs)  # max.dim: a selection with indices, native
    self = args[0]
    dim = aten_arg(args, kwargs, 1, "dim", []) if name in ("amax", "amin") else None
    out = _reduced(func, args, kwargs, dim, bool(aten_arg(args, kwargs, 2, "keepdim", False)) and dim is not None)
    if not is_emulated(out.dtype):
        return func(*args, **kwargs)
    fmt = DTYPE_FORMATS[out.dtype]
    rows = _rows(self, _dims(self, dim))
    if rows.shape[1] == 0:
        return func(*args, **kwargs)  # torch raises for an empty reduction
    result = row_extreme(machine, rows, fmt, largest)
    return from_bits(result, out.dtype, out.shape)
