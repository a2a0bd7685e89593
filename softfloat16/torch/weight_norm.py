"""Weight normalization (``torch.nn.utils.weight_norm`` / ``parametrizations.weight_norm``):
``_weight_norm_interface`` and its backward, written as torch 2.13's CPU kernels compute them.

torch runs this fused kernel for FP32 and BF16 weights normalized along their first or last
dimension (other cases are ``v * (g / norm_except_dim(v))``, ops the mode emulates one by one).
``w = v * (g / norm)``, ``norm`` the 2-norm of each slice, kept in FP32 (the second result, FP32
for BF16 weights too). Everything is computed in FP32 and rounded once into ``w``'s dtype:

- first dimension (one norm per row of ``N = numel / size(0)`` values): the row's squares summed by
  torch's ``map_reduce_all``: 8 FP32 lane accumulators (AVX2 vectors, measured) started from the
  first 8 squares, each later square added to its lane (``acc + x * x``, the square rounded first,
  measured), a last partial vector into its first lanes, then the lanes added as a tree
  (``l + l^4``, ``l + l^2``, ``l + l^1``); rows shorter than a vector are summed in index order.
  BF16 rows go 16 at a time into two such accumulators (``v[0:8]`` and ``v[8:16]`` of each block),
  added lane by lane before the tree. ``a = g / norm``; ``w = v * a``.
- last dimension (one norm per column): each thread's rows summed per column in row order, each
  step ``fma(v, v, buffer)`` (GCC fuses ``buffer + v * v``, measured), the threads' partial sums
  added in thread order from +0 (the machine's ``threads``, rows split as torch's
  ``parallel_for`` splits them); ``w = v * (g / norm)``.
- backward: ``sum = Σ grad_w * v`` by the same sums; ``grad_g = sum / norm`` (rounded into ``g``'s
  dtype); ``a = g / norm``, ``b = a * grad_g / norm`` (the unrounded ``grad_g``);
  ``grad_v = fma(-b, v, a * grad_w)`` (torch's ``a * grad_w - b * v`` as GCC fuses it, measured).
  BF16 products of two BF16 values are exact in FP32, so fused and unfused sums agree there.
"""
from __future__ import annotations

import numpy as np
import torch

from .machine import Machine
from .opmath import ZERO32, result32, widen32
from .registry import NotEmulated, implements

__all__ = ["weight_norm", "weight_norm_backward"]

_LANES = 8  # Vectorized<float> of the AVX2 kernels torch runs here (measured)


def _terms_sum(machine: Machine, x: np.ndarray, y: np.ndarray, bf16: bool) -> np.ndarray:
    """``Σ x * y`` of each row (M, N), as torch's ``map2_reduce_all`` (``map_reduce_all`` for x = y)."""
    m, n = x.shape
    add, mul = machine.add, machine.mul
    width = 2 * _LANES if bf16 else _LANES
    if n < width:
        products = np.asarray(mul(x, y))
        if bf16 and n > _LANES:
            head = products[:, :_LANES].copy()
            head[:, :n - _LANES] = add(head[:, :n - _LANES], products[:, _LANES:])
            products, n = head, _LANES
        total = products[:, 0]
        for k in range(1, n):
            total = np.asarray(add(total, products[:, k]))
        return total

    def step(acc, lo, hi):  # acc + x * y, the product rounded first (torch's map and reduce lambdas)
        return np.asarray(add(acc, mul(x[:, lo:hi], y[:, lo:hi])))

    accs = [np.asarray(mul(x[:, k * _LANES:(k + 1) * _LANES], y[:, k * _LANES:(k + 1) * _LANES]))
            for k in range(width // _LANES)]
    d = width
    while d + width <= n:
        accs = [step(acc, d + k * _LANES, d + (k + 1) * _LANES) for k, acc in enumerate(accs)]
        d += width
    for k, acc in enumerate(accs):  # the last partial vector: into its first lanes
        lo = d + k * _LANES
        hi = min(lo + _LANES, n)
        if hi > lo:
            acc[:, :hi - lo] = step(acc[:, :hi - lo], lo, hi)
    lanes = accs[0] if len(accs) == 1 else np.asarray(add(accs[0], accs[1]))
    while lanes.shape[1] > 1:  # vec_reduce_all: l + l^4, l + l^2, l + l^1
        half = lanes.shape[1] // 2
        lanes = np.asarray(add(lanes[:, :half], lanes[:, half:]))
    return lanes[:, 0]


def _column_sums(machine: Machine, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``Σ x * y`` of each column (M, N): per-thread row-order sums (``buf + x * y``), then the
    threads' sums added in order from +0, rows split as ``parallel_for(0, M, 1)`` splits them."""
    m, n = x.shape
    threads = max(1, min(machine.threads, m))
    chunk = -(-m // threads)
    total = np.full(n, ZERO32, np.uint32)
    for start in range(0, m, chunk):
        partial = np.full(n, ZERO32, np.uint32)
        for i in range(start, min(start + chunk, m)):  # buf + x * y: one expression, fused by GCC
            partial = np.asarray(machine.fma(x[i], y[i], partial))
        total = np.asarray(machine.add(total, partial))
    return total


def _checked(func, v: torch.Tensor, g: torch.Tensor, dim: int) -> int:
    if v.dtype not in (torch.float32, torch.bfloat16) or g.dtype != v.dtype:
        raise NotEmulated(f"{func}: v of {v.dtype} and g of {g.dtype} (torch's fused kernel: float32, bfloat16)")
    dim = dim % max(v.dim(), 1)
    if dim not in (0, v.dim() - 1):
        raise NotEmulated(f"{func}: dim {dim} (torch's fused kernel takes the first or the last dimension)")
    return dim


def _layout(v: torch.Tensor, dim: int):
    """(M, N) and whether the norms are per row (first dimension) or per column (last)."""
    if dim == 0:
        rows = v.shape[0] if v.dim() else 1
        return (rows, v.numel() // max(rows, 1)), True
    n = v.shape[-1]
    return (v.numel() // max(n, 1), n), False


@implements("_weight_norm_interface", inplace=False)
def weight_norm(machine, func, args, kwargs):
    """``(w, norm)``: ``w = v * (g / ||v||)`` per slice along ``dim`` (0 or the last), ``norm`` in
    FP32 (module doc: torch's lane and thread sums)."""
    if any(argument.is_out for argument in func._schema.arguments):
        raise NotEmulated(f"{func}: out= overload")
    v, g = args[0], args[1]
    dim = _checked(func, v, g, int(args[2] if len(args) > 2 else kwargs.get("dim", 0)))
    (m, n), per_row = _layout(v, dim)
    v32 = widen32(machine, v.contiguous()).reshape(m, n)
    g32 = widen32(machine, g.contiguous()).reshape(-1)
    bf16 = v.dtype == torch.bfloat16
    if per_row:
        norm = np.asarray(machine.sqrt(_terms_sum(machine, v32, v32, bf16)))
        w = machine.mul(v32, np.asarray(machine.div(g32, norm))[:, None])
    else:
        norm = np.asarray(machine.sqrt(_column_sums(machine, v32, v32)))
        w = machine.mul(v32, np.asarray(machine.div(g32, norm))[None, :])
    w = result32(machine, w, v.dtype, v.shape)
    return w, result32(machine, norm, torch.float32, g.shape)


@implements("_weight_norm_interface_backward", inplace=False)
def weight_norm_backward(machine, func, args, kwargs):
    """``(grad_v, grad_g)``: ``grad_g = Σ grad_w * v / norm``, ``grad_v = a * grad_w - b * v`` with
    ``a = g / norm``, ``b = a * grad_g / norm`` (module doc)."""
    if any(argument.is_out for argument in func._schema.arguments):
        raise NotEmulated(f"{func}: out= overload")
    grad_w, v, g, norms = args[0], args[1], args[2], args[3]
    dim = _checked(func, v, g, int(args[4] if len(args) > 4 else kwargs["dim"]))
    if grad_w.dtype != v.dtype or norms.dtype != torch.float32:
        raise NotEmulated(f"{func}: grad_w of {grad_w.dtype}, saved_norms of {norms.dtype}")
    (m, n), per_row = _layout(v, dim)
    gw32 = widen32(machine, grad_w.contiguous()).reshape(m, n)
    v32 = widen32(machine, v.contiguous()).reshape(m, n)
    g32 = widen32(machine, g.contiguous()).reshape(-1)
    norm = widen32(machine, norms.contiguous()).reshape(-1)
    if per_row:
        total = _terms_sum(machine, gw32, v32, v.dtype == torch.bfloat16)
    else:
        total = _column_sums(machine, gw32, v32)
    grad_g = np.asarray(machine.div(total, norm))
    a = np.asarray(machine.div(g32, norm))
    b = np.asarray(machine.div(machine.mul(a, grad_g), norm))
    a, b = (a[:, None], b[:, None]) if per_row else (a[None, :], b[None, :])
    # a * grad_w - b * v: GCC fuses the second product (fma(-b, v, a * grad_w)), measured
    grad_v = machine.fma(machine.neg(np.broadcast_to(b, v32.shape)), v32, machine.mul(a, gw32))
    return result32(machine, grad_v, v.dtype, v.shape), result32(machine, grad_g, g.dtype, g.shape)
