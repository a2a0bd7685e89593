"""Convolutions (1-d, 2-d, 3-d; regular and transposed) forward and backward, through im2col and
the emulated GEMM of :mod:`.linear`, so that the mode's ``accumulate`` format, ``order`` and tensor
core apply to every reduction.

``F.conv1d/2d/3d``, ``nn.Conv*d`` and ``F.conv_transpose*d`` reach the mode as
``aten.convolution`` and ``aten.convolution_backward``. With ``s`` the stride, ``p`` the
padding, ``d`` the dilation and ``o``, ``k`` multi-indices over output positions and kernel
offsets (row-major), for each group of channels:

- **forward**: ``y[n, co, o] = sum over (ci, k) of xpad[n, ci, o*s + k*d] * w[co, ci, k]``, the
  terms in row-major order of ``(ci, k1, ..., kd)``; padded positions are +0 terms. The sum is a
  matmul (exact products, ``accumulate``, ``order``, from +0), then ``+ bias`` as one FP32 step,
  then one rounding into the result's format.
- **grad_weight**: ``dw[co, ci, k] = sum over (n, o) of dy[n, co, o] * xpad[n, ci, o*s + k*d]``,
  terms in row-major order of ``(n, o1, ..., od)``, one matmul, one rounding.
- **grad_bias**: ``sum over (n, o)`` of ``dy[n, co, o]``, row-major, as ``sum`` computes it.
- **grad_input** (col2im): first ``t[n, o, ci, k] = sum over co of dy[n, co, o] * w[co, ci, k]``
  (a matmul, kept in FP32), then each input position ``i`` accumulates, from +0, the ``t`` of
  every (o, k) with ``o*s + k*d - p = i``, kernel offsets in row-major order, each addition an
  FP32 step; terms landing in the padding are dropped; one rounding into the format.
- **transposed** convolution is the adjoint: its forward is the grad_input computation above
  (with ``x`` in the role of ``dy``) plus the bias in FP32; its backward is the regular forward
  (grad_input) and the regular grad_weight with the roles of input and gradient exchanged.
"""
from __future__ import annotations

import itertools

import numpy as np
import torch

from .linear import accumulate_products
from .machine import Machine
from .operands import meta_call
from .reductions import row_sums
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, bits, from_bits, laid_out

__all__ = ["Geometry", "convolution", "convolution_backward", "forward32", "input_gradient32", "per_dim",
           "weight_gradient32"]

_CONV_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class Geometry:
    """Stride, padding, dilation (one entry per spatial dimension, a single value applying to
    every dimension) and the number of groups of a convolution; ``op`` names the aten op in errors.

    >>> Geometry(2, [2], [1, 0], [1], 1, "aten.convolution").stride
    (2, 2)
    """

    def __init__(self, dims: int, stride, padding, dilation, groups, op: str) -> None:
        self.stride = per_dim(stride, dims, "stride", op)
        self.padding = per_dim(padding, dims, "padding", op)
        self.dilation = per_dim(dilation, dims, "dilation", op)
        self.groups = int(groups)
        if any(s < 1 for s in self.stride) or any(p < 0 for p in self.padding) or any(d < 1 for d in self.dilation) \
                or self.groups < 1:
            raise ValueError(f"{op}: stride {self.stride}, padding {self.padding}, dilation {self.dilation}, "
                             f"groups {self.groups}: expected stride, dilation, groups >= 1 and padding >= 0")


def per_dim(values, dims: int, name: str, op: str, default: tuple | None = None) -> tuple[int, ...]:
    """An aten int-list argument (stride, padding, ...) as one int per spatial dimension: a single
    value applies to all; an empty list or None means ``default`` (pooling's stride: the kernel).

    >>> per_dim([2], 3, "stride", "aten.avg_pool3d")
    (2, 2, 2)
    """
    if values is None or (isinstance(values, (list, tuple)) and len(values) == 0):
        if default is None:
            raise ValueError(f"{op}: {name} is required")
        return tuple(default)
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    if len(values) == 1:
        values = values * dims
    if len(values) != dims:
        raise ValueError(f"{op}: {name} has {len(values)} entries for {dims} spatial dimension(s)")
    return tuple(values)


def _gemm(machine: Machine, a: np.ndarray, b: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """FP32 patterns of ``a @ b`` (bit arrays of ``dtype``) accumulated as the mode's matmuls are."""
    return accumulate_products(machine, from_bits(a, dtype), from_bits(b, dtype))


def _columns(x: np.ndarray, kernel: tuple, geometry: Geometry, out_sizes: tuple) -> np.ndarray:
    """im2col of (N, C, *S) patterns: (groups, N * prod(out), C/groups * prod(kernel)), rows in
    row-major order of (n, o1..od), columns of (c, k1..kd). Padding is the pattern 0 (+0)."""
    dims = len(kernel)
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in geometry.padding])
    strides = padded.strides
    shape = padded.shape[:2] + tuple(out_sizes) + tuple(kernel)
    window_strides = strides[:2] + tuple(strides[2 + i] * geometry.stride[i] for i in range(dims)) + tuple(
        strides[2 + i] * geometry.dilation[i] for i in range(dims))
    windows = np.lib.stride_tricks.as_strided(padded, shape, window_strides, writeable=False)
    # (N, C, *out, *kernel) -> (N, *out, C, *kernel)
    windows = np.moveaxis(windows, 1, 1 + dims)
    batch, channels = x.shape[0], x.shape[1]
    per_group = channels // geometry.groups
    rows = batch * int(np.prod(out_sizes, dtype=np.int64))
    return np.stack([windows[(slice(None),) * (1 + dims) + (slice(g * per_group, (g + 1) * per_group),)]
                     .reshape(rows, per_group * int(np.prod(kernel, dtype=np.int64)))
                     for g in range(geometry.groups)])


def _channels_last_rows(y: np.ndarray) -> np.ndarray:
    """(N, C, *O) -> (N * prod(O), C): one row per (n, o) in row-major order."""
    return np.moveaxis(y, 1, -1).reshape(-1, y.shape[1])


def forward32(machine: Machine, x: np.ndarray, w: np.ndarray, dtype: torch.dtype, geometry: Geometry,
              out_sizes: tuple) -> np.ndarray:
    """FP32 patterns (N, C_out, *out) of the convolution of ``x`` (N, C_in, *S) with ``w``
    (C_out, C_in/groups, *K), both bit arrays of ``dtype``, before bias and rounding.

    >>> import softfloat16 as sf
    >>> x = sf.fp16.from_float(np.array([[[0.0, 1.0, 2.0, 2.0**-11]]]))
    >>> w = sf.fp16.from_float(np.array([[[1.0, 1.0]]]))
    >>> sf.fp32.to_float(forward32(Machine(), x, w, torch.float16, Geometry(1, 1, 0, 1, 1, "conv"), (3,)))
    array([[[1.        , 3.        , 2.00048828]]])
    """
    kernel = w.shape[2:]
    columns = _columns(x, kernel, geometry, out_sizes)
    per_group = w.shape[0] // geometry.groups
    parts = [_gemm(machine, columns[g], w[g * per_group:(g + 1) * per_group].reshape(per_group, -1).T, dtype)
             for g in range(geometry.groups)]
    acc = np.concatenate(parts, axis=1)  # (N * prod(out), C_out)
    return np.moveaxis(acc.reshape((x.shape[0],) + tuple(out_sizes) + (w.shape[0],)), -1, 1)


def weight_gradient32(machine: Machine, dy: np.ndarray, x: np.ndarray, dtype: torch.dtype, geometry: Geometry,
                      kernel: tuple) -> np.ndarray:
    """FP32 patterns (C_out, C_in/groups, *K) of the weight gradient: for each weight, the sum
    over (n, o) in row-major order of ``dy[n, co, o] * xpad[n, ci, o*s + k*d]`` (one matmul)."""
    columns = _columns(x, kernel, geometry, dy.shape[2:])
    rows = _channels_last_rows(dy)
    per_group = dy.shape[1] // geometry.groups
    parts = [_gemm(machine, np.ascontiguousarray(rows[:, g * per_group:(g + 1) * per_group].T), columns[g], dtype)
             for g in range(geometry.groups)]
    return np.concatenate(parts, axis=0).reshape((dy.shape[1], x.shape[1] // geometry.groups) + tuple(kernel))


def input_gradient32(machine: Machine, dy: np.ndarray, w: np.ndarray, dtype: torch.dtype, geometry: Geometry,
                     in_sizes: tuple) -> np.ndarray:
    """FP32 patterns (N, C_in, *S) of the input gradient (col2im of ``dy @ w``): the per-window
    sums over output channels (one matmul per group, kept in FP32), then at each input position
    the contributions of the kernel offsets in row-major order, added from +0 in FP32 steps."""
    kernel, dims = tuple(w.shape[2:]), w.ndim - 2
    out_sizes = dy.shape[2:]
    per_group_out = w.shape[0] // geometry.groups
    per_group_in = w.shape[1]
    rows = _channels_last_rows(dy)
    parts = [_gemm(machine, np.ascontiguousarray(rows[:, g * per_group_out:(g + 1) * per_group_out]),
                   w[g * per_group_out:(g + 1) * per_group_out].reshape(per_group_out, -1), dtype)
             for g in range(geometry.groups)]
    # (groups, N*prod(O), C_in/groups * prod(K)) -> (N, C_in, *O, *K)
    batch = dy.shape[0]
    contributions = np.stack(parts).reshape((geometry.groups, batch) + tuple(out_sizes) + (per_group_in,) + kernel)
    contributions = np.moveaxis(contributions, 0, 1)  # (N, groups, *O, C_g, *K)
    contributions = np.moveaxis(contributions, 2 + dims, 2)  # (N, groups, C_g, *O, *K)
    contributions = contributions.reshape((batch, geometry.groups * per_group_in) + tuple(out_sizes) + kernel)
    padded_sizes = tuple(s + 2 * p for s, p in zip(in_sizes, geometry.padding))
    total = np.zeros((batch, geometry.groups * per_group_in) + padded_sizes, dtype=np.uint32)  # +0
    for offset in itertools.product(*(range(k) for k in kernel)):
        target = (slice(None), slice(None)) + tuple(
            slice(k * d, k * d + s * (o - 1) + 1, s)
            for k, d, s, o in zip(offset, geometry.dilation, geometry.stride, out_sizes))
        term = contributions[(Ellipsis,) + offset]
        total[target] = machine.add(total[target], term)
    crop = (slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(geometry.padding, in_sizes))
    return np.ascontiguousarray(total[crop])


def _check_dtypes(op: str, *tensors) -> torch.dtype:
    dtype = tensors[0].dtype
    for t in tensors:
        if t is not None and t.dtype != dtype:
            raise NotEmulated(f"{op}: tensors of {dtype} and {t.dtype}")
    if dtype not in _CONV_DTYPES:
        raise NotEmulated(f"{op} of {dtype} (emulated: float16, bfloat16, float32)")
    return dtype


def _add_bias(machine: Machine, acc32: np.ndarray, bias: torch.Tensor | None, fmt) -> np.ndarray:
    if bias is None:
        return acc32
    shape = (1, -1) + (1,) * (acc32.ndim - 2)
    return np.asarray(machine.add(acc32, machine.widen(bits(bias), fmt).reshape(shape)))


def _checked_meta(op: str, func, args, kwargs, x, w, groups):
    """The op on meta tensors (torch's own checks and output shapes); its errors name the op and
    the shapes, which the meta functions' messages ("Invalid channel dimensions") leave out."""
    try:
        return meta_call(func, args, kwargs)
    except RuntimeError as error:
        raise RuntimeError(f"{op}: {error} (input {tuple(x.shape)}, weight {tuple(w.shape)}, groups {groups})") \
            from error


def _conv_args(func, args, kwargs):
    names = ["input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups"]
    return [aten_arg(args, kwargs, i, name) for i, name in enumerate(names)]


def _channels_last(out, dtype: torch.dtype):
    """The channels-last memory format torch CPU's kernels keep for this result (measured, torch 2.13
    on x86: 2-d convolutions; 3-d ones except in float16, whose 3-d kernel is not oneDNN's), or None."""
    if out.dim() == 4:
        return torch.channels_last
    return torch.channels_last_3d if out.dim() == 5 and dtype != torch.float16 else None


def _output_layout(out, x: torch.Tensor, w: torch.Tensor):
    """The forward result's layout: channels-last when the input or the weight is and the kernel
    keeps it (:func:`_channels_last`), else contiguous (the meta result's own rule differs)."""
    memory = _channels_last(out, x.dtype)
    if memory is not None and any(t.is_contiguous(memory_format=memory) and not t.is_contiguous() for t in (x, w)):
        return laid_out(out.shape, torch.empty(out.shape, device="meta", memory_format=memory).stride())
    return out.shape


def _gradient_layout(meta, dtype: torch.dtype):
    """A gradient's layout: the meta result's where the kernel keeps channels-last, else contiguous."""
    return laid_out(meta.shape, meta.stride()) if _channels_last(meta, dtype) is not None else meta.shape


@implements("convolution", "_convolution", inplace=False)
def convolution(machine, func, args, kwargs):
    """Forward convolution, regular or transposed, 1-d to 3-d: im2col (or col2im) around the
    emulated GEMM, bias added in FP32, one rounding (module docstring: the orders)."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname not in ("default", "deprecated"):
        raise NotEmulated(f"{op}.{func._overloadname}")
    x, w, bias, stride, padding, dilation, transposed, _, groups = _conv_args(func, args, kwargs)
    out = _checked_meta(op, func, args, kwargs, x, w, groups)
    if not out.dtype.is_floating_point or out.dtype not in DTYPE_FORMATS:
        return func(*args, **kwargs)
    dtype = _check_dtypes(op, x, w, bias)
    if x.dim() != w.dim():
        raise NotEmulated(f"{op}: input of {x.dim()} dimensions with a weight of {w.dim()} (unbatched input)")
    fmt = DTYPE_FORMATS[dtype]
    geometry = Geometry(w.dim() - 2, stride, padding, dilation, groups, op)
    if transposed:
        acc = input_gradient32(machine, bits(x), bits(w), dtype, geometry, tuple(out.shape[2:]))
    else:
        acc = forward32(machine, bits(x), bits(w), dtype, geometry, tuple(out.shape[2:]))
    acc = _add_bias(machine, acc, bias, fmt)
    return from_bits(machine.narrow(acc, fmt), dtype, _output_layout(out, x, w))


@implements("convolution_backward", inplace=False)
def convolution_backward(machine, func, args, kwargs):
    """(grad_input, grad_weight, grad_bias) of ``convolution``, each computed only where
    ``output_mask`` asks for it (None otherwise), each rounded once (module docstring: the orders)."""
    op = "aten.convolution_backward"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    names = ["grad_output", "input", "weight", "bias_sizes", "stride", "padding", "dilation", "transposed",
             "output_padding", "groups", "output_mask"]
    dy, x, w, _, stride, padding, dilation, transposed, _, groups, mask = (
        aten_arg(args, kwargs, i, name) for i, name in enumerate(names))
    outs = _checked_meta(op, func, args, kwargs, x, w, groups)
    if dy.dtype not in DTYPE_FORMATS:
        return func(*args, **kwargs)
    dtype = _check_dtypes(op, dy, x, w)
    if x.dim() != w.dim():
        raise NotEmulated(f"{op}: input of {x.dim()} dimensions with a weight of {w.dim()} (unbatched input)")
    fmt = DTYPE_FORMATS[dtype]
    geometry = Geometry(w.dim() - 2, stride, padding, dilation, groups, op)
    dy_bits, x_bits, w_bits = bits(dy), bits(x), bits(w)
    kernel = tuple(w.shape[2:])
    results = [None, None, None]
    if mask[0]:
        if transposed:  # the adjoint of a transposed convolution is the regular one
            grad = forward32(machine, dy_bits, w_bits, dtype, geometry, tuple(x.shape[2:]))
        else:
            grad = input_gradient32(machine, dy_bits, w_bits, dtype, geometry, tuple(x.shape[2:]))
        results[0] = from_bits(machine.narrow(grad, fmt), dtype, _gradient_layout(outs[0], dtype))
    if mask[1]:
        if transposed:  # input and gradient exchange roles
            grad = weight_gradient32(machine, x_bits, dy_bits, dtype, geometry, kernel)
        else:
            grad = weight_gradient32(machine, dy_bits, x_bits, dtype, geometry, kernel)
        results[1] = from_bits(machine.narrow(grad, fmt), dtype, _gradient_layout(outs[1], dtype))
    if mask[2]:
        rows = np.ascontiguousarray(_channels_last_rows(dy_bits).T)  # (C_out, N * prod(O))
        sums = machine.narrow(row_sums(machine, rows, fmt), fmt)
        results[2] = from_bits(sums, dtype, _gradient_layout(outs[2], dtype))
    return tuple(results)

