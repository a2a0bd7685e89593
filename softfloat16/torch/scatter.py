"""Embedding gradients and scatter-adds on the emulator: ``embedding_dense_backward``, ``index_add``
and ``index_put`` with ``accumulate=True``. Each destination accumulates in FP32 (one FP32 step per
addition, :func:`scatter_add32`), starting from its value (+0 for the embedding gradient), adding
the sources in index order, and is rounded once.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .machine import Machine
from .operands import meta_call, operand32
from .opmath import result32, widen32
from .registry import NotEmulated, aten_arg, implements
from .tensors import is_emulated

__all__ = ["index_put_accumulate", "scatter_add32"]


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
