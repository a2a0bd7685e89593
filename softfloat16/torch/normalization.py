"""Variance and standard deviation, and layer norm (forward and backward), on the emulator.

Every arithmetic step is an FP32 operation of the machine on operands widened exactly from their
formats (torch's "opmath", :mod:`softfloat16.torch.opmath`), and each result is rounded once into
its dtype; sums are FP32 sums in the machine's order (:func:`~softfloat16.torch.opmath.sum32`).

- ``var``/``std`` (and ``var_mean``/``std_mean``): two passes, ``mean = sum(x) / n``, then
  ``sum((x - mean)**2) / max(n - correction, 0)``; ``std`` is its FP32 square root. (torch CPU
  runs Welford's algorithm in float64 and rounds its result once.)
- ``native_layer_norm``: the same two-pass moments per row, ``rstd = 1 / sqrt(var + eps)``, then
  ``y = (x - mean) * rstd * weight + bias``. Its backward is torch CPU's formula
  (``dx = a*dy*w + b*x + c``), with FP32 sums.

Batch norm and group norm are in :mod:`softfloat16.torch.channel_norms`, dropout in
:mod:`softfloat16.torch.dropout`, the scatter-adds in :mod:`softfloat16.torch.scatter`.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .elementwise import ONE32
from .machine import Machine
from .operands import meta_call
from .opmath import constant32, moments32, result32, sum32, widen32
from .registry import NotEmulated, aten_arg, implements
from .tensors import is_emulated

__all__ = ["native_layer_norm", "native_layer_norm_backward", "parameter_dtype", "variance"]


# -- variance and standard deviation ------------------------------------------------------------------
def _reduced_dims(x: torch.Tensor, dim) -> list[int]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(x.dim()))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({d % max(x.dim(), 1) for d in dims})


def _rows(x32: np.ndarray, dims: list[int]) -> np.ndarray:
    """FP32 patterns as (kept, reduced): kept dimensions first, reduced ones last, row-major."""
    if x32.ndim == 0:
        return x32.reshape(1, 1)
    kept = [d for d in range(x32.ndim) if d not in dims]
    count = int(np.prod([x32.shape[d] for d in dims], dtype=np.int64))
    return np.ascontiguousarray(np.transpose(x32, kept + dims)).reshape(-1, count)


def _variance_args(func, args, kwargs):
    """(dim, correction, keepdim) of var / std / var_mean / std_mean, for each overload."""
    overload = func._overloadname
    if overload == "default":  # (self, unbiased=True)
        return None, 1 if aten_arg(args, kwargs, 1, "unbiased", True) else 0, False
    if overload == "dim":  # (self, dim, unbiased=True, keepdim=False)
        unbiased = aten_arg(args, kwargs, 2, "unbiased", True)
        return aten_arg(args, kwargs, 1, "dim"), 1 if unbiased else 0, aten_arg(args, kwargs, 3, "keepdim", False)
    if overload == "correction":  # (self, dim=None, *, correction=None, keepdim=False)
        correction = aten_arg(args, kwargs, 2, "correction")
        return aten_arg(args, kwargs, 1, "dim"), 1 if correction is None else correction, aten_arg(
            args, kwargs, 3, "keepdim", False)
    raise NotEmulated(f"{func}: the out= overloads are not emulated")



@implements("var", "std", "var_mean", "std_mean", inplace=False)
def variance(machine, func, args, kwargs):
    """Variance / standard deviation (with the mean for ``var_mean`` / ``std_mean``) by
    :func:`moments32` (``correction``, ``unbiased`` and ``dim`` as torch reads them), ``std`` the
    FP32 square root of the variance; each result rounded once into the dtype."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    name = func.overloadpacket.__name__
    dim, correction, _ = _variance_args(func, args, kwargs)
    meta = meta_call(func, args, kwargs)
    first = meta[0] if isinstance(meta, tuple) else meta
    rows = _rows(widen32(machine, x, str(func), "self"), _reduced_dims(x, dim))
    mean, var, _ = moments32(machine, rows, correction)
    spread = machine.sqrt(var) if name.startswith("std") else var
    result = result32(machine, spread, first.dtype, first.shape)
    if name.endswith("_mean"):
        return result, result32(machine, mean, meta[1].dtype, meta[1].shape)
    return result


# -- layer norm ---------------------------------------------------------------------------------------
def _normalized_rows(machine: Machine, x: torch.Tensor, normalized_shape, op: str) -> np.ndarray:
    count = math.prod(normalized_shape)
    if tuple(x.shape[x.dim() - len(normalized_shape):]) != tuple(normalized_shape):
        raise NotEmulated(f"{op}: input of shape {tuple(x.shape)} does not end in normalized_shape "
                          f"{tuple(normalized_shape)}")
    return widen32(machine, x, op, "input").reshape(-1, count)


def _parameter32(machine: Machine, tensor, count: int, op: str, name: str):
    if tensor is None:
        return None
    if tensor.numel() != count:
        raise NotEmulated(f"{op}: {name} has {tensor.numel()} elements, normalized_shape {count}")
    return widen32(machine, tensor, op, name).reshape(1, count)


@implements("native_layer_norm", inplace=False)
def native_layer_norm(machine, func, args, kwargs):
    """Layer norm over the trailing ``normalized_shape`` dimensions, per row in FP32 steps:
    ``mean = sum(x) / n``, ``var = sum((x - mean)**2) / n``, ``rstd = 1 / sqrt(var + eps)``
    (``eps`` as a float32), ``y = (x - mean) * rstd * weight + bias``; ``y`` rounded once into the
    input's dtype, ``mean`` and ``rstd`` once into theirs (torch's: the input's, or float32 when
    weight and bias are float32 next to a float16/bfloat16 input)."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_layer_norm"
    normalized_shape = [int(s) for s in aten_arg(args, kwargs, 1, "normalized_shape")]
    weight, bias = aten_arg(args, kwargs, 2, "weight"), aten_arg(args, kwargs, 3, "bias")
    eps = aten_arg(args, kwargs, 4, "eps")
    if x.numel() == 0:
        return func(*args, **kwargs)  # nothing to round
    rows = _normalized_rows(machine, x, normalized_shape, op)
    count = rows.shape[1]
    w32, b32 = (_parameter32(machine, t, count, op, n) for t, n in ((weight, "weight"), (bias, "bias")))
    mean, var, deviations = moments32(machine, rows)
    rstd = machine.div(ONE32, machine.sqrt(machine.add(var, constant32(eps))))
    y = machine.mul(deviations, np.asarray(rstd)[:, None])
    if w32 is not None:
        y = machine.mul(y, w32)
    if b32 is not None:
        y = machine.add(y, b32)
    # torch CPU's statistics dtype (its meta kernel says float32 for every reduced input; the CPU
    # kernel returns the input's dtype unless float32 parameters accompany a float16/bfloat16 input).
    statistics = parameter_dtype(x, weight, bias)
    kept = tuple(x.shape[:x.dim() - len(normalized_shape)]) + (1,) * len(normalized_shape)
    return (result32(machine, y, x.dtype, x.shape), result32(machine, mean, statistics, kept),
            result32(machine, rstd, statistics, kept))


def _column_sums(machine: Machine, rows32: np.ndarray) -> np.ndarray:
    """FP32 sums over the rows (for each column), rows in index order."""
    return sum32(machine, np.ascontiguousarray(rows32.T))


@implements("native_layer_norm_backward", inplace=False)
def native_layer_norm_backward(machine, func, args, kwargs):
    """torch CPU's layer-norm gradient, each operation an FP32 step, sums by :func:`sum32`, with
    ``a = rstd``, ``g = dy * w`` (``dy`` without weight) and ``scale = 1 / n`` (an FP32 division):

    - ``dx = a*dy*w + b*x + c`` (left to right), ``b = (sum(g) * mean - sum(g*x)) * a * a * a * scale``,
      ``c = -b * mean - sum(g) * a * scale``; one rounding into the input's dtype;
    - ``dweight = sum over rows of dy * (a*x + (-a * mean))``, ``dbias = sum over rows of dy``, each
      rounded once into its dtype (torch CPU rounds dweight and dbias into the input's dtype after
      every row: the mode does not).

    ``mean`` and ``rstd`` are the saved forward outputs, as torch reads them (rounded to their dtype)."""
    grad, x = args[0], args[1]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_layer_norm_backward"
    normalized_shape = [int(s) for s in aten_arg(args, kwargs, 2, "normalized_shape")]
    mean, rstd = aten_arg(args, kwargs, 3, "mean"), aten_arg(args, kwargs, 4, "rstd")
    weight, bias = aten_arg(args, kwargs, 5, "weight"), aten_arg(args, kwargs, 6, "bias")
    output_mask = aten_arg(args, kwargs, 7, "output_mask")
    if x.numel() == 0:
        return func(*args, **kwargs)
    xs = _normalized_rows(machine, x, normalized_shape, op)
    count = xs.shape[1]
    dy = widen32(machine, grad, op, "grad_out").reshape(-1, count)
    mu = widen32(machine, mean, op, "mean").reshape(-1, 1)
    a = widen32(machine, rstd, op, "rstd").reshape(-1, 1)
    w32 = _parameter32(machine, weight, count, op, "weight")
    # torch CPU: dweight and dbias take the weight's dtype (the bias's without a weight).
    parameter = next((t for t in (weight, bias) if t is not None), x)
    shape = tuple(normalized_shape)
    results = []
    if output_mask[0]:
        g = dy if w32 is None else machine.mul(dy, w32)
        ds = sum32(machine, machine.mul(g, xs))[:, None]
        db = sum32(machine, g)[:, None]
        scale = machine.div(ONE32, constant32(count))
        b = machine.mul(machine.mul(machine.mul(machine.mul(machine.sub(machine.mul(db, mu), ds), a), a), a), scale)
        c = machine.sub(machine.mul(machine.neg(b), mu), machine.mul(machine.mul(db, a), scale))
        first = machine.mul(a, dy) if w32 is None else machine.mul(machine.mul(a, dy), w32)
        dx = machine.add(machine.add(first, machine.mul(b, xs)), c)
        results.append(result32(machine, dx, x.dtype, x.shape))
    else:
        results.append(None)
    if output_mask[1]:
        normalized = machine.add(machine.mul(a, xs), machine.mul(machine.neg(a), mu))
        results.append(result32(machine, _column_sums(machine, machine.mul(dy, normalized)), parameter.dtype, shape))
    else:
        results.append(None)
    results.append(result32(machine, _column_sums(machine, dy), parameter.dtype, shape) if output_mask[2] else None)
    return tuple(results)


def parameter_dtype(x: torch.Tensor, *parameters) -> torch.dtype:
    """torch CPU's dtype of saved statistics: float32 when float32 parameters accompany a
    float16/bfloat16 input ("mixed type"), else the input's."""
    mixed = x.dtype != torch.float32 and any(p is not None and p.dtype == torch.float32 for p in parameters)
    return torch.float32 if mixed else x.dtype
