"""Operands of an aten call as the emulator reads them: bit arrays in the result's format (or FP32
for the opmath steps), with torch's type promotion and its rules for Python scalars."""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
import torch
from torch.utils import _pytree as pytree

from softfloat16.formats import Format

from .machine import FP32, Machine, scalar_bits
from .tensors import DTYPE_FORMATS, INTEGER_VIEWS, bits, laid_out

__all__ = ["Result", "as_signed", "elementwise_result", "fill_bits", "is_scalar", "meta_call",
           "meta_layouts", "operand32", "operand_bits", "unary_shape"]


def is_scalar(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, complex)


def _to_meta(x):
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    return x


def meta_call(func, args: tuple, kwargs: dict):
    """The op run on meta tensors of the same shapes and dtypes: torch's own type promotion and
    broadcasting, without computing anything."""
    meta_args, meta_kwargs = pytree.tree_map(_to_meta, (args, kwargs))
    return func(*meta_args, **meta_kwargs)


def meta_layouts(func, args: tuple, kwargs: dict) -> list:
    """The shape and layout (:func:`~softfloat16.torch.tensors.laid_out`) of each tensor result of
    the op, from :func:`meta_call`: what a non-elementwise op's results need to match torch's
    strides (attention's outputs are transposed views of their buffers)."""
    results = meta_call(func, args, kwargs)
    results = results if isinstance(results, (tuple, list)) else (results,)
    return [laid_out(t.shape, t.stride()) if isinstance(t, torch.Tensor) else None for t in results]


class Result(NamedTuple):
    dtype: torch.dtype
    shape: torch.Size  # or a tensors.Strided: the shape with the strides torch gives the result


def _layout(tensors: list, shape) -> torch.Size | None:
    """The layout TensorIterator gives an elementwise result (its ``reorder_dimensions``): the
    dimensions sorted, fastest first, by the operands' strides (in operand order; a broadcast
    dimension, stride 0, leaves the decision to the next operand; equal strides put the smaller
    size first), and the result dense in that order. Every operand contiguous: contiguous."""
    ndim = len(shape)
    shaped = [t for t in tensors if t.dim() > 0]
    if ndim <= 1 or all(t.is_contiguous() for t in shaped):
        return torch.Size(shape)
    strides = []
    for t in shaped:
        offset = ndim - t.dim()
        row = [0] * offset
        for size, stride, full in zip(t.shape, t.stride(), shape[offset:]):
            row.append(0 if size == 1 and full != 1 else stride)
        strides.append(row)

    def should_swap(dim0: int, dim1: int) -> int:
        for row in strides:
            stride0, stride1 = row[dim0], row[dim1]
            if stride0 == 0 or stride1 == 0:
                continue
            if stride0 != stride1:
                return -1 if stride0 < stride1 else 1
            if shape[dim0] > shape[dim1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # perm[0]: the fastest dimension
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    result, step = [0] * ndim, 1
    for dim in perm:
        result[dim] = step
        step *= max(int(shape[dim]), 1)
    return laid_out(shape, result)


def unary_shape(x: torch.Tensor):
    """The shape and layout of an elementwise op's result on one tensor (TensorIterator's, as
    :func:`_layout`: x's strides when x is dense)."""
    return _layout([x], x.shape)


def elementwise_result(func, args: tuple, kwargs: dict) -> Result:
    """dtype, shape and layout of an elementwise op's result. When every tensor operand has one
    floating dtype and the rest are real Python numbers, that dtype and the broadcast shape (type
    promotion never leaves a floating dtype for a real scalar), with TensorIterator's layout
    (:func:`_layout`); otherwise torch's own answer (:func:`meta_call`). The shape is a tensors.Strided where
    torch's strides are not the contiguous ones: :func:`~softfloat16.torch.tensors.from_bits` then
    gives the result those strides."""
    leaves = pytree.tree_leaves((args, kwargs))
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    if tensors and "dtype" not in kwargs:
        dtype = tensors[0].dtype
        if dtype.is_floating_point and all(t.dtype == dtype for t in tensors) and all(
                isinstance(x, torch.Tensor) or not isinstance(x, complex) for x in leaves):
            shape = tensors[0].shape
            if any(t.shape != shape for t in tensors[1:]):  # torch.broadcast_shapes costs 30 us
                shape = torch.Size(np.broadcast_shapes(*(tuple(t.shape) for t in tensors)))
            return Result(dtype, _layout(tensors, shape))
    key = _promotion_key(func, args, kwargs)
    result = _RESULTS.get(key) if key is not None else None
    if result is None:
        out = meta_call(func, args, kwargs)  # 150 to 250 us: remembered per promotion key
        result = Result(out.dtype, laid_out(out.shape, out.stride()))
        if key is not None and len(_RESULTS) < 4096:
            _RESULTS[key] = result
    return result


_RESULTS: dict[tuple, Result] = {}


def _argument_key(x):
    """What an elementwise op's result dtype, shape and layout can depend on in one argument: a
    tensor's shape, strides and dtype, a number's type (torch promotes by category, never by value), any other
    argument's value (``rounding_mode``, ``dtype``)."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), x.stride(), x.dtype)
    if isinstance(x, numbers.Number):
        return ("number", type(x))
    if isinstance(x, (tuple, list)):
        return (type(x), tuple(_argument_key(item) for item in x))
    hash(x)  # TypeError for an unhashable argument: no key
    return ("value", x)


def _promotion_key(func, args: tuple, kwargs: dict) -> tuple | None:
    try:
        return (func, tuple(_argument_key(a) for a in args),
                tuple(sorted((name, _argument_key(value)) for name, value in kwargs.items())))
    except TypeError:
        return None


def operand_bits(machine: Machine, x, dtype: torch.dtype) -> np.ndarray:
    """``x`` (a tensor or a Python number) as bit patterns of ``dtype``'s format: a tensor of
    another dtype is converted as TensorIterator casts it (rounded by the machine), a Python
    number as torch converts a scalar (double -> float32 -> format, to nearest even)."""
    fmt = DTYPE_FORMATS[dtype]
    if isinstance(x, torch.Tensor):
        return bits(x if x.dtype == dtype else machine.convert(x, dtype))
    if is_scalar(x):
        return scalar_bits(x, fmt, machine.nan)
    raise TypeError(f"unexpected operand {x!r}")


def operand32(machine: Machine, x, dtype: torch.dtype, scalar: str = "cast") -> np.ndarray:
    """``x`` as FP32 patterns for the opmath steps of an op whose result has ``dtype``.

    ``scalar="cast"``: a Python number (or a 0-dim tensor of another dtype) is first converted to
    ``dtype``, then widened: what torch does for ``add``/``sub``, comparisons, ``clamp``.
    ``scalar="opmath"``: it is converted straight to FP32, which torch's CPU ``mul`` and ``div``
    do for a scalar second operand of a half or bfloat16 op (measured on torch 2.13:
    ``x * 0.1`` multiplies by float32(0.1), ``x + 0.1`` adds float16(0.1)).
    """
    fmt = DTYPE_FORMATS[dtype]
    if scalar == "opmath" and fmt is not FP32:
        if is_scalar(x):
            return scalar_bits(x, FP32, machine.nan)
        if isinstance(x, torch.Tensor) and x.dim() == 0 and x.dtype != dtype:
            return operand_bits(machine, x, torch.float32)
    return machine.widen(operand_bits(machine, x, dtype), fmt)


def as_signed(patterns, fmt: Format) -> int:
    """A single bit pattern as the signed integer the same-width torch integer dtype holds."""
    signed = {np.uint8: np.uint8, np.uint16: np.int16, np.uint32: np.int32}[fmt.dtype]
    return int(np.asarray(patterns, dtype=fmt.dtype).reshape(()).view(signed))


def fill_bits(tensor: torch.Tensor, pattern) -> torch.Tensor:
    """Fill ``tensor`` in place with one bit pattern of its format (no rounding by torch)."""
    fmt = DTYPE_FORMATS[tensor.dtype]
    tensor.view(INTEGER_VIEWS[tensor.element_size()]).fill_(as_signed(pattern, fmt))
    return tensor

