"""Normalization, variance, dropout, embedding and scatter-adds on the emulator.

Every arithmetic step is an FP32 operation of the machine on operands widened exactly from their
formats (torch's "opmath"), and each result is rounded once into its dtype. Sums run in FP32 in
the machine's ``order`` over the elements in index order, from +0 (:func:`sum32`): they are the
FP32 accumulators inside these ops, whatever the machine's ``accumulate`` (which governs the
matmuls, ``sum`` and ``mean``).

- ``var``/``std`` (and ``var_mean``/``std_mean``): two passes, ``mean = sum(x) / n``, then
  ``sum((x - mean)**2) / max(n - correction, 0)``; ``std`` is its FP32 square root. (torch CPU
  runs Welford's algorithm in float64 and rounds its result once.)
- ``native_layer_norm``: the same two-pass moments per row, ``rstd = 1 / sqrt(var + eps)``, then
  ``y = (x - mean) * rstd * weight + bias``. Its backward is torch CPU's formula
  (``dx = a*dy*w + b*x + c``), with FP32 sums.
- ``native_dropout``: the mask is torch's own draw (``bernoulli_(1 - p)`` from torch's generator,
  so a ``torch.manual_seed`` gives native torch's mask), the kept values scaled by
  ``float32(1 / (1 - p))`` in one FP32 step.
- ``native_batch_norm`` / ``native_group_norm``: the same two-pass moments per channel / per
  (sample, group); their backwards are torch CPU's formulas in FP32 steps.
- Scatter-adds (``embedding_dense_backward``, ``index_add``, ``index_put`` with
  ``accumulate=True``): each destination accumulates in FP32, starting from its value (+0 for the
  embedding gradient), adding the sources in index order, and is rounded once.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .machine import FP32, Machine, scalar_bits
from .operands import meta_call, operand32
from .reductions import row_sums
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, bits, from_bits, is_emulated

__all__ = ["ARITHMETIC", "constant32", "index_put_accumulate", "moments32", "scatter_add32", "sum32", "widen32"]

#: The dtypes these ops compute in (the float8 formats have no normalization or dropout in torch).
ARITHMETIC = (torch.float16, torch.bfloat16, torch.float32)
ONE32 = np.uint32(0x3F800000)
ZERO32 = np.uint32(0)


def widen32(machine: Machine, tensor: torch.Tensor, op: str = "", name: str = "") -> np.ndarray:
    """FP32 patterns of a float16/bfloat16/float32 tensor, in its shape (row-major order).

    >>> hex(int(widen32(Machine(), torch.tensor([1.5], dtype=torch.float16))[0]))
    '0x3fc00000'
    """
    if tensor.dtype not in ARITHMETIC:
        raise NotEmulated(f"{op}: {name or 'a tensor'} of dtype {tensor.dtype} (emulated: float16, bfloat16, "
                          "float32)")
    return np.asarray(machine.widen(bits(tensor), DTYPE_FORMATS[tensor.dtype])).reshape(tuple(tensor.shape))


def constant32(value) -> np.uint32:
    """A Python number as an FP32 pattern, as torch's CPU kernels turn a double argument into a
    float (nearest even; integers up to 2**24 are exact).

    >>> hex(int(constant32(0.1)))
    '0x3dcccccd'
    """
    return np.uint32(scalar_bits(value, FP32))


def sum32(machine: Machine, rows32: np.ndarray) -> np.ndarray:
    """FP32 sums of the rows of an (m, k) array of FP32 patterns: FP32 accumulation in the
    machine's order, elements in index order, from +0 (an empty row sums to +0).

    >>> m = Machine()
    >>> rows = np.array([[0x3F800000, 0x33800000, 0x33800000]], np.uint32)   # 1, 2**-24, 2**-24
    >>> hex(int(sum32(m, rows)[0]))      # each 2**-24 is half an ulp of 1: a tie, to even, twice
    '0x3f800000'
    """
    rows32 = np.asarray(rows32, dtype=np.uint32)
    if rows32.shape[0] == 0:
        return np.zeros(0, np.uint32)
    return np.asarray(row_sums(machine, rows32, FP32, accumulate=FP32), dtype=np.uint32)


def _result(machine: Machine, patterns32, dtype: torch.dtype, shape) -> torch.Tensor:
    return from_bits(machine.narrow(np.asarray(patterns32, np.uint32), DTYPE_FORMATS[dtype]), dtype, shape)


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


def moments32(machine: Machine, rows32: np.ndarray, correction=0):
    """(mean, variance, deviations) of each row of an (m, n) FP32 array, in FP32 steps:
    ``mean = sum(x) / n``; ``var = sum((x - mean)**2) / max(n - correction, 0)`` (two passes,
    squares rounded to FP32, sums by :func:`sum32`).

    >>> m = Machine()
    >>> x = np.array([[0x3F800000, 0x40000000, 0x40400000]], np.uint32)   # 1, 2, 3
    >>> mean, var, _ = moments32(m, x, correction=1)
    >>> [hex(int(mean[0])), hex(int(var[0]))]                             # 2 and 1
    ['0x40000000', '0x3f800000']
    """
    mean, deviations, squares = _centered(machine, rows32)
    divisor = max(rows32.shape[1] - correction, 0)
    return mean, np.asarray(machine.div(squares, constant32(divisor))), deviations


def _centered(machine: Machine, rows32: np.ndarray):
    """(mean, x - mean, sum of (x - mean)**2) of each row, the first two passes of :func:`moments32`."""
    mean = np.asarray(machine.div(sum32(machine, rows32), constant32(rows32.shape[1])))
    deviations = np.asarray(machine.sub(rows32, mean[:, None]))
    return mean, deviations, sum32(machine, machine.mul(deviations, deviations))


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
    result = _result(machine, spread, first.dtype, first.shape)
    if name.endswith("_mean"):
        return result, _result(machine, mean, meta[1].dtype, meta[1].shape)
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
    statistics = _parameter_dtype(x, weight, bias)
    kept = tuple(x.shape[:x.dim() - len(normalized_shape)]) + (1,) * len(normalized_shape)
    return (_result(machine, y, x.dtype, x.shape), _result(machine, mean, statistics, kept),
            _result(machine, rstd, statistics, kept))


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
        results.append(_result(machine, dx, x.dtype, x.shape))
    else:
        results.append(None)
    if output_mask[1]:
        normalized = machine.add(machine.mul(a, xs), machine.mul(machine.neg(a), mu))
        results.append(_result(machine, _column_sums(machine, machine.mul(dy, normalized)), parameter.dtype, shape))
    else:
        results.append(None)
    results.append(_result(machine, _column_sums(machine, dy), parameter.dtype, shape) if output_mask[2] else None)
    return tuple(results)


# -- dropout ------------------------------------------------------------------------------------------
def _scaled_by_mask(machine: Machine, x: torch.Tensor, mask: torch.Tensor, scale32, op: str) -> torch.Tensor:
    """``x * mask * scale``: the mask (0 or 1) applied exactly, then one FP32 multiplication by
    the FP32 pattern ``scale32``, one rounding."""
    x32 = widen32(machine, x, op, "input")
    keep = np.where(mask.detach().contiguous().numpy().astype(bool), ONE32, ZERO32)
    kept = machine.mul(x32, np.broadcast_to(keep, x32.shape))
    return _result(machine, machine.mul(kept, scale32), x.dtype, x.shape)


@implements("native_dropout", inplace=False)
def native_dropout(machine, func, args, kwargs):
    """Dropout: ``mask = bernoulli(1 - p)`` drawn by torch exactly as its CPU ``native_dropout``
    draws it (same generator, same call), then ``x * mask * scale`` with ``scale = 1 / (1 - p)``
    (0 for ``p = 1``) converted to the input's dtype first, as torch 2.13 CPU does (measured: a
    float16 dropout scales by float16(1/0.9), not float32(1/0.9)), one FP32 multiplication, one
    rounding. ``train=False`` returns a copy of the input and an all-true mask."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    p, train = aten_arg(args, kwargs, 1, "p"), aten_arg(args, kwargs, 2, "train")
    if x.numel() == 0:
        return func(*args, **kwargs)
    if train is not None and not train:
        return x.clone(), torch.ones_like(x, dtype=torch.bool)
    keep = 1.0 - p
    scale = 0.0 if keep == 0 else 1.0 / keep
    # The draw native torch makes (aten/src/ATen/native/Dropout.cpp): one bernoulli_ per element
    # on a tensor shaped like the input, from the default generator.
    mask = torch.empty_like(x, dtype=torch.bool).bernoulli_(keep)
    fmt = DTYPE_FORMATS[x.dtype]
    scale32 = machine.widen(scalar_bits(scale, fmt, machine.nan), fmt)
    return _scaled_by_mask(machine, x, mask, scale32, "native_dropout"), mask


@implements("native_dropout_backward", inplace=False)
def native_dropout_backward(machine, func, args, kwargs):
    """``grad * mask * float32(scale)``: the mask applied exactly, one FP32 multiplication by the
    scale as a float32 (not converted to the dtype, unlike the forward: torch 2.13 CPU, measured),
    one rounding."""
    grad, mask = args[0], args[1]
    scale = aten_arg(args, kwargs, 2, "scale")
    if not is_emulated(grad.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    if mask.shape != grad.shape:
        mask = mask.expand(grad.shape)
    return _scaled_by_mask(machine, grad, mask, constant32(scale), "native_dropout_backward")


# -- embedding and scatter-adds -----------------------------------------------------------------------
def scatter_add32(machine: Machine, accumulators: np.ndarray, targets: np.ndarray, sources: np.ndarray,
                  alpha32=None) -> np.ndarray:
    """``accumulators[targets[i]] += sources[i]`` for i in order, each addition an FP32 step
    (with ``alpha32``: one fma ``sources[i] * alpha + acc``). ``accumulators``: (n, ...) FP32
    patterns, updated in place and returned; ``sources``: (len(targets), ...).

    The i-th occurrence of every target is added in round i, all targets of a round at once.

    >>> acc = np.zeros(2, np.uint32)
    >>> one, tiny = np.uint32(0x3F800000), np.uint32(0x33800000)     # 1 and 2**-24
    >>> [hex(int(v)) for v in scatter_add32(Machine(), acc, np.array([1, 1, 1]), np.array([tiny, tiny, one]))]
    ['0x0', '0x3f800001']
    """
    targets = np.asarray(targets, dtype=np.int64).reshape(-1)
    if targets.size == 0:
        return accumulators
    order = np.argsort(targets, kind="stable")
    ordered = targets[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    lengths = np.diff(np.r_[starts, ordered.size])
    rank = np.arange(ordered.size) - np.repeat(starts, lengths)
    for occurrence in range(int(lengths.max())):
        chosen = order[rank == occurrence]
        where = targets[chosen]
        if alpha32 is None:
            accumulators[where] = machine.add(accumulators[where], sources[chosen])
        else:
            accumulators[where] = machine.fma(sources[chosen], alpha32, accumulators[where])
    return accumulators


@implements("embedding_dense_backward", inplace=False)
def embedding_dense_backward(machine, func, args, kwargs):
    """The gradient of an embedding: for every row of the table, the FP32 sum of the gradient
    rows of the positions holding its index, in index order from +0, rounded once (CUDA's sorted
    accumulation; torch CPU rounds into the dtype after every addition). Positions holding
    ``padding_idx`` contribute nothing. ``scale_grad_by_freq=True`` is not emulated."""
    grad, indices = args[0], args[1]
    if not is_emulated(grad.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    num_weights = int(aten_arg(args, kwargs, 2, "num_weights"))
    padding_idx = int(aten_arg(args, kwargs, 3, "padding_idx"))
    if aten_arg(args, kwargs, 4, "scale_grad_by_freq"):
        raise NotEmulated("embedding_dense_backward with scale_grad_by_freq=True")
    width = grad.shape[-1]
    rows = widen32(machine, grad, "embedding_dense_backward", "grad_output").reshape(-1, width)
    targets = indices.reshape(-1).numpy().astype(np.int64)
    if rows.shape[0] != targets.size:
        raise NotEmulated(f"embedding_dense_backward: {rows.shape[0]} gradient rows for {targets.size} indices")
    if targets.size and (targets.min() < 0 or targets.max() >= num_weights):
        raise IndexError(f"embedding_dense_backward: an index outside [0, {num_weights})")
    keep = targets != padding_idx
    table = np.zeros((num_weights, width), np.uint32)
    scatter_add32(machine, table, targets[keep], rows[keep])
    return _result(machine, table, grad.dtype, (num_weights, width))


def _positions(shape) -> torch.Tensor:
    """Every element's row-major position in a tensor of ``shape`` (int64)."""
    return torch.arange(math.prod(shape), dtype=torch.int64).reshape(tuple(shape))


def _accumulate_into(machine: Machine, func, self: torch.Tensor, targets: torch.Tensor, sources32: np.ndarray,
                     alpha32=None) -> torch.Tensor:
    """``self`` (widened) plus the sources at ``targets`` by :func:`scatter_add32`, rounded once;
    written into ``self`` for an in-place op (``name_``), a new tensor otherwise."""
    accumulators = widen32(machine, self, str(func), "self").reshape(-1).copy()
    scatter_add32(machine, accumulators, targets.reshape(-1).numpy(), sources32.reshape(-1), alpha32)
    result = _result(machine, accumulators, self.dtype, self.shape)
    if func.overloadpacket.__name__.endswith("_"):
        return self.copy_(result)
    return result


def index_put_accumulate(machine: Machine, func, args, kwargs):
    """``index_put`` / ``index_put_`` with ``accumulate=True`` (``self[indices] += values``): each
    destination element in FP32, its value plus the values aimed at it in index order (row-major
    order of the indexing result), rounded once. ``values`` of another dtype are first converted
    by the machine. Torch CPU rounds into the dtype after every addition; the two agree where no
    destination is hit twice.

    >>> x, values = torch.zeros(3, dtype=torch.float16), torch.tensor([1, 2**-11, 2**-11], dtype=torch.float16)
    >>> index_put_accumulate(Machine(), torch.ops.aten.index_put.default,
    ...                      (x, [torch.tensor([0, 0, 0])], values, True), {}).tolist()   # 1 + 2**-10
    [1.0009765625, 0.0, 0.0]
    """
    self, indices, values = args[0], list(args[1]), args[2]
    if not is_emulated(self.dtype):
        return func(*args, **kwargs)
    if values.dtype != self.dtype:
        values = machine.convert(values, self.dtype)
    # None in aten's index list means "this whole dimension" (not a new axis, as in Python).
    selection = tuple(slice(None) if index is None else index for index in indices)
    targets = _positions(self.shape)[selection]
    sources = np.broadcast_to(widen32(machine, values, str(func), "values"), tuple(targets.shape))
    return _accumulate_into(machine, func, self, targets, sources)


@implements("index_put", "index_put_", inplace=False)
def index_put(machine, func, args, kwargs):
    """``self[indices] = values``: values of another dtype converted by the machine, the write
    itself native; with ``accumulate=True`` (``self[indices] += values``) :func:`index_put_accumulate`."""
    self, indices, values = args[0], args[1], args[2]
    if aten_arg(args, kwargs, 3, "accumulate", False):
        return index_put_accumulate(machine, func, args, kwargs)
    if values.dtype != self.dtype and is_emulated(self.dtype):
        values = machine.convert(values, self.dtype)
    return func(self, indices, values, *args[3:], **kwargs)


@implements("index_add", inplace=True)
def index_add(machine, func, args, kwargs):
    """``self.index_add(dim, index, source, alpha=1)``: each destination element in FP32, its value
    plus ``source`` slices in index order (``alpha != 1``: one FP32 fma ``source * alpha + acc``
    per slice, alpha converted to the dtype first, as ``add`` does), rounded once."""
    self = args[0]
    if not is_emulated(self.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    dim, index, source = aten_arg(args, kwargs, 1, "dim"), aten_arg(args, kwargs, 2, "index"), args[3]
    alpha = aten_arg(args, kwargs, 4, "alpha", 1)
    if source.dtype != self.dtype:
        raise NotEmulated(f"index_add: source of dtype {source.dtype} into self of dtype {self.dtype}")
    meta_call(func, args, kwargs)  # torch's own checks of dim, index and shapes
    shape = tuple(self.shape) if self.dim() else (1,)
    dim = dim % len(shape)
    index = index.reshape(-1)
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= shape[dim]):
        raise IndexError(f"index_add: an index outside [0, {shape[dim]}) along dim {dim}")
    targets = _positions(shape).index_select(dim, index)
    sources = widen32(machine, source, "index_add", "source").reshape(tuple(targets.shape))
    alpha32 = None if alpha == 1 and not isinstance(alpha, bool) else operand32(machine, alpha, self.dtype)
    return _accumulate_into(machine, func, self, targets, sources, alpha32)


# -- batch norm and group norm ------------------------------------------------------------------------
def _channel_rows(machine: Machine, x: torch.Tensor, op: str, name: str = "input") -> np.ndarray:
    """(C, N * spatial) FP32 patterns of an (N, C, ...) tensor: each channel's elements in
    (sample, position) row-major order."""
    if x.dim() < 2:
        raise NotEmulated(f"{op}: {name} of shape {tuple(x.shape)} (expected (N, C, ...))")
    values = widen32(machine, x, op, name)
    return np.ascontiguousarray(np.moveaxis(values.reshape(x.shape[0], x.shape[1], -1), 1, 0)).reshape(
        x.shape[1], -1)


def _from_channel_rows(machine: Machine, rows32, like: torch.Tensor) -> torch.Tensor:
    shape = (like.shape[1], like.shape[0], -1)
    values = np.moveaxis(np.asarray(rows32, np.uint32).reshape(shape), 0, 1)
    return _result(machine, np.ascontiguousarray(values), like.dtype, like.shape)


def _channel_parameter(machine: Machine, tensor, channels: int, op: str, name: str, fill: np.uint32):
    """A per-channel parameter as an FP32 column (``fill`` where it is None)."""
    if tensor is None:
        return np.full((channels, 1), fill, np.uint32)
    if tensor.numel() != channels:
        raise NotEmulated(f"{op}: {name} has {tensor.numel()} elements for {channels} channels")
    return widen32(machine, tensor, op, name).reshape(channels, 1)


def _parameter_dtype(x: torch.Tensor, *parameters) -> torch.dtype:
    """torch CPU's dtype of saved statistics: float32 when float32 parameters accompany a
    float16/bfloat16 input ("mixed type"), else the input's."""
    mixed = x.dtype != torch.float32 and any(p is not None and p.dtype == torch.float32 for p in parameters)
    return torch.float32 if mixed else x.dtype


def _inverse_std(machine: Machine, var32, eps: float):
    """``1 / sqrt(var + eps)`` in two FP32 steps (torch's InvStd: 0 when var and eps are both 0)."""
    result = np.asarray(machine.div(ONE32, machine.sqrt(machine.add(var32, constant32(eps)))))
    if eps == 0:
        result = np.where(np.asarray(var32) == ZERO32, ZERO32, result)
    return result


@implements("native_batch_norm", inplace=False)
def native_batch_norm(machine, func, args, kwargs):
    """Batch norm over every dimension but the channels (dim 1), in FP32 steps.

    Training: per channel ``mean = sum(x) / n``, ``var = sum((x - mean)**2) / n`` (two passes,
    FP32 sums), ``invstd = 1 / sqrt(var + eps)`` (0 when both are 0, as torch); mean and invstd are
    rounded into the statistics' dtype (torch CPU's: the input's, or float32 beside float32
    parameters) and, as in torch CPU, those rounded values make ``y = (x - mean) * invstd * weight
    + bias``; running statistics, if given, become ``momentum * mean + (1 - momentum) *
    running_mean`` and the same with the unbiased ``sum((x - mean)**2) / (n - 1)`` (momentum and
    1 - momentum as float32s), each rounded once into its tensor. Evaluation: the running
    statistics in place of the batch's, ``invstd`` in FP32. Returns (y, saved mean, saved
    invstd), the saved ones empty in evaluation, as torch CPU."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_batch_norm"
    weight, bias = aten_arg(args, kwargs, 1, "weight"), aten_arg(args, kwargs, 2, "bias")
    running_mean, running_var = aten_arg(args, kwargs, 3, "running_mean"), aten_arg(args, kwargs, 4, "running_var")
    training, momentum = aten_arg(args, kwargs, 5, "training"), aten_arg(args, kwargs, 6, "momentum")
    eps = aten_arg(args, kwargs, 7, "eps")
    rows = _channel_rows(machine, x, op)
    channels, count = rows.shape
    if count == 0:
        return func(*args, **kwargs)
    statistics = _parameter_dtype(x, weight, bias)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32)
    b32 = _channel_parameter(machine, bias, channels, op, "bias", ZERO32)
    if training:
        mean, _, squares = _centered(machine, rows)
        invstd = _inverse_std(machine, machine.div(squares, constant32(count)), eps)
        saved = (_result(machine, mean, statistics, (channels,)), _result(machine, invstd, statistics, (channels,)))
        # As torch CPU: the statistics, once stored in their dtype, are what the rest reads.
        mean, invstd = (widen32(machine, t, op) for t in saved)
        for stored, batch in ((running_mean, mean), (running_var, machine.div(squares, constant32(count - 1)))):
            if stored is not None:
                previous = widen32(machine, stored, op, "running statistics").reshape(-1)
                update = machine.add(machine.mul(constant32(momentum), batch),
                                     machine.mul(constant32(1 - momentum), previous))
                stored.copy_(_result(machine, update, stored.dtype, stored.shape))
        deviations = machine.sub(rows, mean[:, None])
    else:
        if running_mean is None or running_var is None:
            raise NotEmulated(f"{op}: evaluation without running statistics")
        mean = widen32(machine, running_mean, op, "running_mean").reshape(-1)
        invstd = _inverse_std(machine, widen32(machine, running_var, op, "running_var").reshape(-1), eps)
        deviations = machine.sub(rows, mean[:, None])
        saved = (torch.empty(0, dtype=statistics), torch.empty(0, dtype=statistics))
    y = machine.add(machine.mul(machine.mul(deviations, np.asarray(invstd)[:, None]), w32), b32)
    return (_from_channel_rows(machine, y, x),) + saved


@implements("native_batch_norm_backward", inplace=False)
def native_batch_norm_backward(machine, func, args, kwargs):
    """torch CPU's batch-norm gradient in FP32 steps, per channel, with ``dotp = sum((x - mean) *
    dy)`` and ``sum(dy)`` (FP32 sums): training: ``k = dotp * invstd * invstd / n``, ``dx = ((dy -
    sum(dy) / n) - (x - mean) * k) * invstd * weight``; evaluation (running statistics,
    ``invstd = 1 / sqrt(running_var + eps)``): ``dx = dy * invstd * weight``; ``dweight = dotp *
    invstd``, ``dbias = sum(dy)``; each rounded once."""
    grad, x = args[0], args[1]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_batch_norm_backward"
    weight = aten_arg(args, kwargs, 2, "weight")
    running_mean, running_var = aten_arg(args, kwargs, 3, "running_mean"), aten_arg(args, kwargs, 4, "running_var")
    save_mean, save_invstd = aten_arg(args, kwargs, 5, "save_mean"), aten_arg(args, kwargs, 6, "save_invstd")
    train, eps = aten_arg(args, kwargs, 7, "train"), aten_arg(args, kwargs, 8, "eps")
    output_mask = aten_arg(args, kwargs, 9, "output_mask")
    rows, dy = _channel_rows(machine, x, op), _channel_rows(machine, grad, op, "grad_out")
    channels, count = rows.shape
    if count == 0:
        return func(*args, **kwargs)
    if train:
        mean = widen32(machine, save_mean, op, "save_mean").reshape(-1, 1)
        invstd = widen32(machine, save_invstd, op, "save_invstd").reshape(-1, 1)
    else:
        mean = widen32(machine, running_mean, op, "running_mean").reshape(-1, 1)
        invstd = _inverse_std(machine, widen32(machine, running_var, op, "running_var"), eps).reshape(-1, 1)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32)
    centered = machine.sub(rows, mean)
    dotp = sum32(machine, machine.mul(centered, dy))[:, None]
    grad_sum = sum32(machine, dy)[:, None]
    parameter = x.dtype if weight is None else weight.dtype
    results = [None, None, None]
    if output_mask[0]:
        if train:
            k = machine.div(machine.mul(machine.mul(dotp, invstd), invstd), constant32(count))
            grad_mean = machine.div(grad_sum, constant32(count))
            dx = machine.mul(machine.mul(machine.sub(machine.sub(dy, grad_mean), machine.mul(centered, k)), invstd),
                             w32)
        else:
            dx = machine.mul(machine.mul(dy, invstd), w32)
        results[0] = _from_channel_rows(machine, dx, x)
    if output_mask[1]:
        results[1] = _result(machine, machine.mul(dotp, invstd), parameter, (channels,))
    if output_mask[2]:
        results[2] = _result(machine, grad_sum, parameter, (channels,))
    return tuple(results)


def _group_args(args, kwargs, first: int):
    return tuple(int(aten_arg(args, kwargs, first + i, name)) for i, name in enumerate(("N", "C", "HxW", "group")))


@implements("native_group_norm", inplace=False)
def native_group_norm(machine, func, args, kwargs):
    """Group norm: per sample and group of ``C / group`` channels, ``mean``, ``var`` (divisor
    n), ``rstd = 1 / sqrt(var + eps)`` as layer norm computes them, ``y = (x - mean) * rstd *
    weight[c] + bias[c]`` in FP32 steps; y, mean (N, group) and rstd rounded once (statistics in
    torch CPU's dtype)."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_group_norm"
    weight, bias = aten_arg(args, kwargs, 1, "weight"), aten_arg(args, kwargs, 2, "bias")
    samples, channels, positions, groups = _group_args(args, kwargs, 3)
    eps = aten_arg(args, kwargs, 7, "eps")
    if x.numel() == 0 or channels % groups:
        return func(*args, **kwargs)
    rows = widen32(machine, x, op, "input").reshape(samples * groups, -1)
    mean, var, deviations = moments32(machine, rows)
    rstd = machine.div(ONE32, machine.sqrt(machine.add(var, constant32(eps))))
    y = machine.mul(deviations, np.asarray(rstd)[:, None]).reshape(samples, channels, positions)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32)[None]
    b32 = _channel_parameter(machine, bias, channels, op, "bias", ZERO32)[None]
    y = machine.add(machine.mul(y, w32), b32)
    statistics = _parameter_dtype(x, weight, bias)
    return (_result(machine, y, x.dtype, x.shape), _result(machine, mean, statistics, (samples, groups)),
            _result(machine, rstd, statistics, (samples, groups)))


@implements("native_group_norm_backward", inplace=False)
def native_group_norm_backward(machine, func, args, kwargs):
    """torch CPU's group-norm gradient in FP32 steps: per (sample, channel) ``ds = sum(dy * x)``,
    ``db = sum(dy)`` over positions; per (sample, group) ``ds_g = sum_c ds * w``, ``db_g = sum_c db *
    w``, ``b = (db_g * mean - ds_g) * rstd * rstd * rstd * s``, ``c = -b * mean - db_g * rstd * s``
    (``s = 1 / (channels per group * positions)``), ``dx = rstd * w * dy + b * x + c``;
    ``dweight[c] = sum_n (ds - db * mean) * rstd``, ``dbias[c] = sum_n db``; sums FP32, each
    gradient rounded once."""
    grad, x = args[0], args[1]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_group_norm_backward"
    mean, rstd, weight = args[2], args[3], aten_arg(args, kwargs, 4, "weight")
    samples, channels, positions, groups = _group_args(args, kwargs, 5)
    output_mask = aten_arg(args, kwargs, 9, "output_mask")
    if x.numel() == 0:
        return func(*args, **kwargs)
    per_group = channels // groups
    xs = widen32(machine, x, op, "input").reshape(samples * channels, positions)
    dy = widen32(machine, grad, op, "grad_out").reshape(samples * channels, positions)
    mu = widen32(machine, mean, op, "mean").reshape(samples, groups, 1)
    r = widen32(machine, rstd, op, "rstd").reshape(samples, groups, 1)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32).reshape(1, groups, per_group)
    ds = sum32(machine, machine.mul(dy, xs)).reshape(samples, groups, per_group)
    db = sum32(machine, dy).reshape(samples, groups, per_group)
    parameter = x.dtype if weight is None else weight.dtype
    results = [None, None, None]
    if output_mask[0]:
        ds_g = sum32(machine, machine.mul(ds, w32).reshape(-1, per_group)).reshape(samples, groups, 1)
        db_g = sum32(machine, machine.mul(db, w32).reshape(-1, per_group)).reshape(samples, groups, 1)
        s = machine.div(ONE32, constant32(per_group * positions))
        b = machine.mul(machine.mul(machine.mul(machine.mul(machine.sub(machine.mul(db_g, mu), ds_g), r), r), r), s)
        c = machine.sub(machine.mul(machine.neg(b), mu), machine.mul(machine.mul(db_g, r), s))
        shape = (samples, groups, per_group, positions)
        first = machine.mul(machine.mul(r[..., None], w32[..., None]), dy.reshape(shape))
        dx = machine.add(machine.add(first, machine.mul(b[..., None], xs.reshape(shape))), c[..., None])
        results[0] = _result(machine, dx, x.dtype, x.shape)
    if output_mask[1]:
        terms = machine.mul(machine.sub(ds, machine.mul(db, mu)), r).reshape(samples, channels)
        results[1] = _result(machine, sum32(machine, np.ascontiguousarray(np.asarray(terms).T)), parameter,
                             (channels,))
    if output_mask[2]:
        results[2] = _result(machine, sum32(machine, np.ascontiguousarray(db.reshape(samples, channels).T)),
                             parameter, (channels,))
    return tuple(results)
