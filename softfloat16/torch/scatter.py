"""Embedding gradients and scatter-adds on the emulator: ``embedding_dense_backward``, ``index_add``
and ``index_put`` with ``accumulate=True``. Each destination accumulates in FP32 (one FP32 step per
addition, :func:`scatter_add32`), starting from its value (+0 for the embedding gradient), adding
the sources in index order, and is rounded once.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .machine import FP32, Machine, scalar_bits
from .operands import meta_call, operand32
from .opmath import result32, widen32
from .registry import NotEmulated, aten_arg, implements
from .ranges import linspace
from .steps import ieee_16_or_32
from .tensors import DTYPE_FORMATS, bits, from_bits, is_emulated

__all__ = ["histc", "index_put_accumulate", "scatter_add32", "scatter_reduce", "scatter_rounds"]


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
    for chosen in scatter_rounds(targets):
        where = targets[chosen]
        if alpha32 is None:
            accumulators[where] = machine.add(accumulators[where], sources[chosen])
        else:
            accumulators[where] = machine.fma(sources[chosen], alpha32, accumulators[where])
    return accumulators


def scatter_rounds(targets: np.ndarray):
    """The positions of ``targets`` (int64) grouped into rounds: round i holds the i-th occurrence
    of every target (in the order of ``targets``), so a round updates each target at most once.

    >>> [chosen.tolist() for chosen in scatter_rounds(np.array([4, 2, 4, 4]))]
    [[1, 0], [2], [3]]
    """
    if targets.size == 0:
        return
    order = np.argsort(targets, kind="stable")
    ordered = targets[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    lengths = np.diff(np.r_[starts, ordered.size])
    rank = np.arange(ordered.size) - np.repeat(starts, lengths)
    for occurrence in range(int(lengths.max())):
        yield order[rank == occurrence]


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
    return result32(machine, table, grad.dtype, (num_weights, width))


def _positions(shape) -> torch.Tensor:
    """Every element's row-major position in a tensor of ``shape`` (int64)."""
    return torch.arange(math.prod(shape), dtype=torch.int64).reshape(tuple(shape))


def _accumulate_into(machine: Machine, func, self: torch.Tensor, targets: torch.Tensor, sources32: np.ndarray,
                     alpha32=None) -> torch.Tensor:
    """``self`` (widened) plus the sources at ``targets`` by :func:`scatter_add32`, rounded once;
    written into ``self`` for an in-place op (``name_``), a new tensor otherwise."""
    accumulators = widen32(machine, self, str(func), "self").reshape(-1).copy()
    scatter_add32(machine, accumulators, targets.reshape(-1).numpy(), sources32.reshape(-1), alpha32)
    result = result32(machine, accumulators, self.dtype, self.shape)
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


# -- scatter_add, scatter_reduce ---------------------------------------------------------------------
_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
#: The value a destination starts from under include_self=False: +0, 1, -inf, +inf.
_IDENTITY32 = {"sum": np.uint32(0), "mean": np.uint32(0), "prod": np.uint32(0x3F800000),
               "amax": np.uint32(0xFF800000), "amin": np.uint32(0x7F800000)}


def _select(acc: np.ndarray, targets: np.ndarray, sources: np.ndarray, largest: bool) -> None:
    """amax / amin in loop order, as torch's ``acc = isnan(src) ? src : std::max(acc, src)``: a NaN
    source replaces the accumulator, a NaN accumulator stays, ties (``-0``, ``+0``) keep the accumulator."""
    for chosen in scatter_rounds(targets):
        where, value = targets[chosen], sources[chosen]
        current = acc[where]
        replace = FP32.lt(current, value) if largest else FP32.lt(value, current)
        acc[where] = np.where(FP32.is_nan(value) | replace, value, current)


def _scatter_targets(func, self: torch.Tensor, dim: int, index: torch.Tensor) -> tuple[np.ndarray, tuple]:
    """The flat position in ``self`` that each element of ``index`` (row-major) aims at, and index's shape."""
    shape = tuple(self.shape) if self.dim() else (1,)
    index = index.reshape(index.shape if index.dim() else (1,))
    dim = dim % len(shape)
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= shape[dim]):
        raise IndexError(f"{func}: an index outside [0, {shape[dim]}) along dim {dim}")
    targets = torch.gather(_positions(shape), dim, index) if index.numel() else index
    return targets.reshape(-1).numpy().astype(np.int64), tuple(index.shape)


@implements("scatter_add", "scatter_reduce", inplace=True)
def scatter_reduce(machine, func, args, kwargs):
    """``scatter_add(dim, index, src)`` and ``scatter_reduce(dim, index, src, reduce, include_self=True)``
    as torch CPU computes them: every destination in FP32 (for float16/bfloat16 too), starting from
    its value (``include_self=False``: from the reduction's identity, +0, 1, -inf or +inf, at the
    destinations the index hits), updated by the sources aimed at it in loop order (ascending along
    ``dim``), one FP32 step each (``sum``: add, ``prod``: multiply, ``amax``/``amin``: torch's selection),
    then rounded once. ``mean``: that sum rounded into the dtype, divided by the count (the number of
    sources plus one with ``include_self``, rounded into the dtype; 1 where nothing was aimed), rounded."""
    self = args[0]
    if not is_emulated(self.dtype):
        return func(*args, **kwargs)
    if func._overloadname not in ("default", "two"):
        raise NotEmulated(f"{func}: only the tensor-source overload is emulated")
    meta_call(func, args, kwargs)  # torch's checks of dim, shapes, dtypes and reduce
    dim, index = aten_arg(args, kwargs, 1, "dim"), aten_arg(args, kwargs, 2, "index")
    src = aten_arg(args, kwargs, 3, "src")
    if func.overloadpacket.__name__ == "scatter_add":
        reduce, include_self = "sum", True
    else:
        reduce, include_self = aten_arg(args, kwargs, 4, "reduce"), aten_arg(args, kwargs, 5, "include_self", True)
    if reduce not in _REDUCTIONS:
        raise ValueError(f"reduce: expected one of {', '.join(_REDUCTIONS)}, got {reduce!r}")
    if src.dtype != self.dtype:
        raise NotEmulated(f"{func}: src of dtype {src.dtype} into self of dtype {self.dtype}")
    targets, index_shape = _scatter_targets(func, self, dim, index)
    source = src.reshape(src.shape if src.dim() else (1,))[tuple(slice(0, n) for n in index_shape)]
    sources = widen32(machine, source, str(func), "src").reshape(-1)
    accumulators = widen32(machine, self, str(func), "self").reshape(-1).copy()
    if not include_self:
        accumulators[np.unique(targets)] = _IDENTITY32[reduce]
    if reduce in ("sum", "mean"):
        scatter_add32(machine, accumulators, targets, sources)
    elif reduce == "prod":
        for chosen in scatter_rounds(targets):
            where = targets[chosen]
            accumulators[where] = machine.mul(accumulators[where], sources[chosen])
    else:
        _select(accumulators, targets, sources, largest=reduce == "amax")
    if reduce == "mean":
        fmt = DTYPE_FORMATS[self.dtype]
        total = machine.widen(machine.narrow(accumulators, fmt), fmt)
        counts = np.bincount(targets, minlength=accumulators.size) + int(bool(include_self))
        counts32 = np.asarray(FP32.from_float(np.maximum(counts, 1).astype(np.float64)), np.uint32)  # exact < 2**24
        accumulators = machine.div(total, machine.widen(machine.narrow(counts32, fmt), fmt))
    return result32(machine, accumulators, self.dtype, self.shape)


# -- histc ---------------------------------------------------------------------------------------------
def _counts(machine: Machine, fmt, counts: np.ndarray) -> np.ndarray:
    """Bin counts as torch's loop makes them: ``hist[bin] += 1`` in the dtype, once per element,
    each addition rounded (exact below 2**precision; past it, rounding to nearest stops the count)."""
    exact = np.minimum(counts, 1 << fmt.precision)
    value = np.asarray(fmt.from_float(exact.astype(np.float64))).astype(fmt.dtype)
    remaining = counts - exact
    one = fmt.dtype(fmt.one)
    while (remaining > 0).any():
        added = np.asarray(fmt.add(value, one, **machine.step)).astype(fmt.dtype)
        value = np.where(remaining > 0, added, value)
        remaining = np.where(added == value, 0, remaining - 1)
    return value


@implements("histc", inplace=False)
def histc(machine, func, args, kwargs):
    """``histc(self, bins=100, min=0, max=0)`` as torch CPU computes it: ``min == max`` takes the
    input's extremes (then, if still equal, widens them by 1 on each side, in double); the outer edges
    are the first and last elements of ``linspace(min, max, bins + 1)`` in the dtype (emulated);
    an element ``x`` with ``left <= x <= right`` (NaN never) goes to bin
    ``trunc((x - left) * bins / (right - left))``, each operation rounded into the dtype (torch's
    ``Half``/``BFloat16``/``float`` arithmetic), the last bin taking ``right``; the counts are
    ``+= 1`` in the dtype (exact below 2**precision: 2048 for float16, 256 for bfloat16)."""
    self = args[0]
    if not is_emulated(self.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: only the default overload is emulated")
    fmt = ieee_16_or_32(func, DTYPE_FORMATS[self.dtype])
    bins = int(aten_arg(args, kwargs, 1, "bins", 100))
    if bins <= 0:
        raise ValueError(f"bins: expected a positive number of bins, got {bins}")
    left, right = float(aten_arg(args, kwargs, 2, "min", 0)), float(aten_arg(args, kwargs, 3, "max", 0))
    x = bits(self).reshape(-1)
    if left == right and x.size:
        values = np.asarray(fmt.to_float(x), np.float64)
        left, right = float(values.min()), float(values.max())  # NaN if any element is NaN
    if left == right:
        left, right = left - 1, right + 1
    if not (math.isfinite(left) and math.isfinite(right)):
        raise RuntimeError(f"torch.histc: range of [{left}, {right}] is not finite")
    if not left < right:
        raise RuntimeError("torch.histc: max must be larger than min")
    edges = bits(linspace(machine, torch.ops.aten.linspace.default, (left, right, bins + 1), {"dtype": self.dtype}))
    first, last = edges[0], edges[-1]
    inside = fmt.le(first, x) & fmt.le(x, last)
    step = machine.step
    scaled = fmt.mul(fmt.sub(x[inside], first, **step), scalar_bits(bins, fmt, machine.nan), **step)
    position = np.asarray(fmt.to_float(fmt.div(scaled, fmt.sub(last, first, **step), **step)), np.float64)
    if position.size and not (np.isfinite(position).all() and 0 <= position.min() and position.max() < bins + 1):
        raise NotEmulated("histc: a bin position outside [0, bins] (torch's result is undefined there)")
    position = np.minimum(np.trunc(position).astype(np.int64), bins - 1)
    counts = np.bincount(position, minlength=bins)
    return from_bits(_counts(machine, fmt, counts), self.dtype, (bins,))
