"""Distances and norm rescaling: ``dist``, ``_cdist_forward`` (``torch.cdist``), ``_euclidean_dist``
(its matrix-product form) and ``renorm``, written as torch 2.13's CPU kernels compute them.

``dist`` and ``_euclidean_dist`` are sequences of aten ops in torch's C++ (``norm(a - b, p)``; the
squared norms, a concatenation and one matrix product): the mode runs the same sequence, each op
emulated as it is on its own (docs/torch.md). ``_cdist_forward`` takes torch's own route: for
``p = 2`` the matrix-product form when ``compute_mode`` says so (1: always; 0, the default: when
either operand has more than 25 rows), else torch's direct kernel, which torch has for FP32 only:
per output, ``agg = 0``, then for each coordinate ``agg = agg + map(|a - b|)`` in FP32 steps
(``map``: ``d * d`` for p = 2, ``d`` for p = 1, ``min(ceil(d), 1)`` for p = 0; p = inf takes
``agg < d ? d : agg``), finished by ``sqrt`` (p = 2). For p = 2 the compiled loop takes the
coordinates four at a time with the square rounded, and fuses ``agg + d * d`` into one fma for the
last ``m mod 4`` (measured on every width from 1 to 20). ``renorm`` takes the norms of the slices
(``linalg_vector_norm`` over every dimension but ``dim``, in FP32 for 16-bit tensors), the factor
``norm > maxnorm ? maxnorm / (norm + 1e-7) : 1`` in FP32 (rounded into the tensor's dtype), and
multiplies.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .machine import FP32
from .operands import is_scalar
from .opmath import ARITHMETIC, constant32, result32, widen32
from .registry import NotEmulated, aten, aten_arg, emulation, implements
from .tensors import is_emulated

__all__ = ["cdist_backward", "cdist_forward", "dist", "euclidean_dist", "renorm"]

_ONE32 = constant32(1.0)


def _no_out(func, kwargs) -> None:
    if any(argument.is_out for argument in func._schema.arguments):
        raise NotEmulated(f"{func}: out= overload")


@implements("dist", inplace=False)
def dist(machine, func, args, kwargs):
    """``norm(self - other, p)`` (torch's definition): the emulated subtraction (broadcast, one
    rounding into the promoted dtype), then ``linalg_vector_norm`` over all its elements."""
    _no_out(func, kwargs)
    self, other = args[0], args[1]
    p = aten_arg(args, kwargs, 2, "p", 2)
    with emulation(machine):
        return aten.linalg_vector_norm.default(aten.sub.Tensor(self, other), p)


@implements("_euclidean_dist", inplace=False)
def euclidean_dist(machine, func, args, kwargs):
    """torch's matrix-product form of the p = 2 distances, op by op: ``x1n = sum(x1 ** 2, -1)``,
    ``x2n`` likewise; ``[-2 * x1, x1n, 1] @ [x2, 1, x2n].T``; ``clamp_min(0)``, ``sqrt``."""
    _no_out(func, kwargs)
    x1, x2 = args[0], args[1]
    if not x1.dim() == x2.dim() in (2, 3):
        raise NotEmulated(f"{func}: operands of {x1.dim()} and {x2.dim()} dimensions (emulated: both 2 or both 3)")
    product = aten.mm.default if x1.dim() == 2 else aten.bmm.default  # what torch's matmul runs for them
    with emulation(machine):
        x1_norm = aten.sum.dim_IntList(aten.pow.Tensor_Scalar(x1, 2), [-1], True)
        x2_norm = aten.sum.dim_IntList(aten.pow.Tensor_Scalar(x2, 2), [-1], True)
        x1_ = aten.cat.default([aten.mul.Tensor(x1, -2), x1_norm, aten.ones_like.default(x1_norm)], -1)
        x2_ = aten.cat.default([x2, aten.ones_like.default(x2_norm), x2_norm], -1)
        result = product(x1_, aten.transpose.int(x2_, -2, -1))
        return aten.sqrt.default(aten.clamp_min.default(result, 0))


@implements("_cdist_forward", inplace=False)
def cdist_forward(machine, func, args, kwargs):
    """``torch.cdist``: torch's matrix-product form for p = 2 when ``compute_mode`` asks for it (1)
    or leaves it to torch (0 or None) and either operand has more than 25 rows; otherwise torch's
    direct FP32 kernel (module doc), for p 0, 1, 2 and inf."""
    _no_out(func, kwargs)
    x1, x2 = args[0], args[1]
    p = float(aten_arg(args, kwargs, 2, "p"))
    mode = aten_arg(args, kwargs, 3, "compute_mode")
    mode = 0 if mode is None else int(mode)
    if not (is_emulated(x1.dtype) or is_emulated(x2.dtype)):
        return func(*args, **kwargs)
    if x1.dim() < 2 or x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D, X2 got: {x2.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if x1.dtype != x2.dtype or x1.dtype not in ARITHMETIC:
        raise NotEmulated(f"{func}: operands of {x1.dtype} and {x2.dtype}")
    if not p >= 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    if mode not in (0, 1, 2):
        raise RuntimeError(f"possible modes: 0, 1, 2, but was: {mode}")
    r1, r2, m = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    batch = tuple(torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    shape = (*batch, r1, r2)
    if r1 == 0 or r2 == 0 or math.prod(batch) == 0 or m == 0:
        return torch.zeros(shape, dtype=x1.dtype)
    a = x1.expand(*batch, r1, m).reshape(-1, r1, m)
    b = x2.expand(*batch, r2, m).reshape(-1, r2, m)
    if p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25))):
        # torch passes the operands as they are when there is one batch (a 2-D pair: one mm), else expanded
        pair = (x1, x2) if math.prod(batch) == 1 and x1.dim() == x2.dim() else (a, b)
        return euclidean_dist(machine, aten._euclidean_dist.default, pair, {}).reshape(shape)
    if x1.dtype != torch.float32:
        raise NotEmulated(f"{func}: torch's direct cdist kernel has no {x1.dtype} form (\"cdist\" not implemented)")
    if p not in (0.0, 1.0, 2.0, math.inf):
        raise NotEmulated(f"{func}: p = {p} (emulated: 0, 1, 2, inf)")
    a32, b32 = widen32(machine, a.contiguous()), widen32(machine, b.contiguous())
    difference = np.asarray(machine.sub(a32[:, :, None, :], b32[:, None, :, :])) & np.uint32(0x7FFFFFFF)
    agg = np.zeros(difference.shape[:-1], np.uint32)
    unrolled = m - m % 4  # GCC's loop: 4 coordinates a turn, then the rest one by one
    for k in range(m):
        d = difference[..., k]
        if p == math.inf:
            agg = np.where(agg.view(np.float32) < d.view(np.float32), d, agg)
            continue
        if p == 2 and k >= unrolled:  # the remainder loop fuses agg + d * d (measured)
            agg = np.asarray(machine.fma(d, d, agg))
            continue
        if p == 0:
            d = np.where(d.view(np.float32) > 0, _ONE32, d)  # min(ceil(d), 1) of d >= 0 (NaN stays)
        elif p == 2:
            d = machine.mul(d, d)
        agg = np.asarray(machine.add(agg, d))
    if p == 2:
        agg = machine.sqrt(agg)
    return result32(machine, agg, torch.float32, shape)


def _sign32(machine, d: np.ndarray) -> np.ndarray:
    """torch's vectorised ``sign`` of FP32 patterns: 1, -1, +0 for a zero, NaN for a NaN."""
    values = d.view(np.float32)
    nan = np.asarray(machine.propagate_nan(FP32, d))
    return np.where(values > 0, _ONE32, np.where(values < 0, constant32(-1.0),
                                                 np.where(np.isnan(values), nan, np.uint32(0)))).astype(np.uint32)


@implements("_cdist_backward", inplace=False)
def cdist_backward(machine, func, args, kwargs):
    """The gradient of torch's direct cdist kernel with respect to ``x1`` (FP32; p 0, 1, 2, inf),
    as its CPU kernel computes it: per row ``i`` of ``x1``, from +0, ``res = res + term`` for each row
    ``j`` of ``x2`` in order, ``term`` of ``diff = x1[i] - x2[j]``: ``grad * sign(diff)`` (p = 1),
    ``dist == 0 ? 0 : grad * diff / dist`` (p = 2), ``grad * sign(diff) * (1 - min(1, ceil(||diff| -
    dist|)))`` (p = inf), 0 (p = 0). ``x2``'s gradient is the same op with the operands swapped."""
    _no_out(func, kwargs)
    grad, x1, x2, p, distances = args[0], args[1], args[2], float(args[3]), args[4]
    if any(t.dtype != torch.float32 for t in (grad, x1, x2, distances)):
        raise NotEmulated(f"{func}: torch's cdist backward kernel is FP32 only here (got {x1.dtype})")
    if p not in (0.0, 1.0, 2.0, math.inf):
        raise NotEmulated(f"{func}: p = {p} (emulated: 0, 1, 2, inf)")
    r1, r2, m = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    batch = tuple(torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    if r1 == 0 or r2 == 0 or m == 0 or math.prod(batch) == 0:
        return torch.zeros_like(x1)
    a = widen32(machine, x1.expand(*batch, r1, m).contiguous()).reshape(-1, r1, m)
    b = widen32(machine, x2.expand(*batch, r2, m).contiguous()).reshape(-1, r2, m)
    g = widen32(machine, grad.contiguous()).reshape(-1, r1, r2)
    dist32 = widen32(machine, distances.contiguous()).reshape(-1, r1, r2)
    res = np.zeros(a.shape, np.uint32)
    if p != 0:
        for j in range(r2):
            diff = np.asarray(machine.sub(a, b[:, j:j + 1, :]))
            gj, dj = g[:, :, j:j + 1], dist32[:, :, j:j + 1]
            if p == 2:
                term = machine.div(machine.mul(gj, diff), dj)
                term = np.where(dj.view(np.float32) == 0, np.uint32(0), term)
            else:
                term = np.asarray(machine.mul(gj, _sign32(machine, diff)))
                if p == math.inf:
                    gap = np.asarray(machine.sub(diff & np.uint32(0x7FFFFFFF), dj)) & np.uint32(0x7FFFFFFF)
                    above = gap.view(np.float32) > 0  # ceil(gap) >= 1: min(1, ceil) = 1, 1 - 1 = 0
                    keep = np.where(np.isnan(gap.view(np.float32)), gap, np.where(above, np.uint32(0), _ONE32))
                    term = machine.mul(term, keep)
            res = np.asarray(machine.add(res, term))
    return result32(machine, res, torch.float32, (*batch, r1, m))


@implements("renorm")
def renorm(machine, func, args, kwargs):
    """``self * factor``, ``factor = norm > maxnorm ? maxnorm / (norm + 1e-7) : 1`` per slice along
    ``dim``: ``norm`` the ``linalg_vector_norm`` of the slice (FP32 for 16-bit tensors), the factor
    in FP32 steps, rounded into ``self``'s dtype, then the emulated product."""
    _no_out(func, kwargs)
    self = args[0]
    p, dim, maxnorm = aten_arg(args, kwargs, 1, "p"), aten_arg(args, kwargs, 2, "dim"), aten_arg(args, kwargs, 3,
                                                                                                 "maxnorm")
    if self.dtype not in ARITHMETIC:
        if is_emulated(self.dtype):
            raise NotEmulated(f"{func} of {self.dtype}")
        return func(*args, **kwargs)
    if not (is_scalar(p) and is_scalar(maxnorm)):
        raise NotEmulated(f"{func}: p {p!r}, maxnorm {maxnorm!r}")
    if self.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {self.dim()} dimensions")
    if not float(p) > 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if not float(maxnorm) >= 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {float(maxnorm)}")
    dim = dim % self.dim()
    reduced = [d for d in range(self.dim()) if d != dim]
    with emulation(machine):
        extra = {} if self.dtype == torch.float32 else {"dtype": torch.float32}
        norms = aten.linalg_vector_norm.default(self, float(p), reduced, True, **extra)
    norms32 = widen32(machine, norms)
    limit = constant32(float(maxnorm))
    scaled = machine.div(limit, machine.add(norms32, constant32(1e-7)))
    factor32 = np.where(norms32.view(np.float32) > limit.view(np.float32), scaled, _ONE32)
    factor = result32(machine, factor32, self.dtype, norms.shape)
    with emulation(machine):
        return aten.mul.Tensor(self, factor)
