"""Pooling (1-d through 3-d: ``F.max_pool1d`` and ``F.avg_pool1d`` reach the mode as the 2-d ops)
forward and backward, written as torch 2.13's CPU kernels compute them (measured bit for bit on
random inputs; docs: the per-op table).

- **max pooling** is exact selection over the window's in-bounds elements in row-major order:
  an element replaces the running maximum when it is larger (so the first of equal values wins,
  ``-0`` and ``+0`` counting as equal) or when it is a NaN (so the *last* NaN wins, returned as
  the NaN profile makes it: quieted, payload kept, under ``x86``). The index is the flat position
  within the input's spatial plane.
- **average pooling** sums the in-bounds elements of each window, in row-major order, as ``sum``
  does (``accumulate`` format and ``order``, from +0; FP32 sequential is torch CPU's loop), then
  divides in FP32 (by the divisor as an FP32 number; adaptive pooling divides by each window
  length in turn, ``sum / kh / kw``) and rounds once. (3-d adaptive average pooling: torch CPU
  sums in FP16/BF16 and rounds each division; so does the mode.)
- **backward** (max, average, adaptive): torch CPU's scatter: ``grad_input`` starts at +0 and
  each output, in row-major order, adds its share to the positions it pooled, every addition an
  FP32 step rounded into the tensor's format (torch adds in ``half``/``bfloat16``). Average
  pooling's share is ``grad / divisor`` with the divisor converted to the format first, rounded
  into the format (adaptive: ``grad / kh / kw``, each division rounded).
- **reflection / replication padding** (``nn.Conv*d(padding_mode=...)``): copies, run by torch;
  the gradient adds each padded position's gradient to the position it copies, in row-major
  order of the padded positions, each addition rounded into the format (torch CPU's loop).
"""
from __future__ import annotations

import numpy as np
import torch

from softfloat16.formats import Format

from .conv import per_dim
from .machine import FP32, Machine, scalar_bits
from .operands import meta_call
from .reductions import row_sums
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, bits, from_bits, laid_out, with_layout

__all__ = ["Windows", "adaptive_windows", "fixed_windows"]

_POOL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class Windows:
    """The pooling windows of every output position of one spatial plane.

    ``positions``: (P, K) flat input positions (row-major within the plane) of the P outputs'
    window elements in row-major window order; ``valid``: (P, K) which of them lie inside the
    input (the others are padding or past the window's end, and take no part).
    """

    def __init__(self, positions: np.ndarray, valid: np.ndarray) -> None:
        self.positions = np.where(valid, positions, 0)
        self.valid = valid

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(output index, input position) of every in-bounds window element, outputs in
        row-major order and, within one output, window order."""
        outputs, slots = np.nonzero(self.valid)
        return outputs, self.positions[outputs, slots]


def _combine(per_dim: list[tuple[np.ndarray, np.ndarray]], sizes: tuple) -> Windows:
    """Windows of a d-dimensional plane from each dimension's (out, k) positions and validity:
    outputs and window elements both in row-major order."""
    dims = len(per_dim)
    plane_strides = [int(np.prod(sizes[i + 1:], dtype=np.int64)) for i in range(dims)]
    positions, valid = np.zeros((), np.int64), np.ones((), bool)
    for i, (pos, ok) in enumerate(per_dim):
        shape = [1] * (2 * dims)
        shape[i], shape[dims + i] = pos.shape
        positions = positions + pos.reshape(shape) * plane_strides[i]
        valid = valid & ok.reshape(shape)
    full = tuple(p.shape[0] for p, _ in per_dim) + tuple(p.shape[1] for p, _ in per_dim)
    outputs = int(np.prod(full[:dims], dtype=np.int64))
    return Windows(np.broadcast_to(positions, full).reshape(outputs, -1),
                   np.broadcast_to(valid, full).reshape(outputs, -1))


def fixed_windows(sizes: tuple, out_sizes: tuple, kernel: tuple, stride: tuple, padding: tuple,
                  dilation: tuple) -> Windows:
    """Windows of max/avg pooling: output ``o`` of a dimension pools ``o*s - p + k*d``, k < kernel.

    >>> windows = fixed_windows((4,), (2,), (3,), (2,), (1,), (1,))   # kernel 3, stride 2, padding 1
    >>> windows.positions.tolist(), windows.valid.tolist()
    ([[0, 0, 1], [1, 2, 3]], [[False, True, True], [True, True, True]])
    """
    per_dim = []
    for size, out, k, s, p, d in zip(sizes, out_sizes, kernel, stride, padding, dilation):
        pos = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
        per_dim.append((pos, (pos >= 0) & (pos < size)))
    return _combine(per_dim, sizes)


def adaptive_windows(sizes: tuple, out_sizes: tuple) -> tuple[Windows, list[np.ndarray]]:
    """Windows of adaptive pooling (output ``o`` of ``O`` over an input of ``S``: positions
    ``floor(o*S/O)`` to ``ceil((o+1)*S/O)`` exclusive, torch's rule) and each dimension's window
    lengths.

    >>> windows, lengths = adaptive_windows((5,), (2,))
    >>> windows.positions.tolist(), [length.tolist() for length in lengths]
    ([[0, 1, 2], [2, 3, 4]], [[3, 3]])
    """
    per_dim, lengths = [], []
    for size, out in zip(sizes, out_sizes):
        o = np.arange(out)
        start, end = (o * size) // out, -((-(o + 1) * size) // out)
        longest = int((end - start).max()) if out else 0
        pos = start[:, None] + np.arange(longest)[None, :]
        per_dim.append((pos, pos < end[:, None]))
        lengths.append(end - start)
    return _combine(per_dim, sizes), lengths


def _format(op: str, *tensors) -> Format:
    for t in tensors:
        if t.dtype not in _POOL_DTYPES:
            raise NotEmulated(f"{op} of {t.dtype} (emulated: float16, bfloat16, float32)")
        if t.dtype != tensors[0].dtype:
            raise NotEmulated(f"{op}: tensors of {tensors[0].dtype} and {t.dtype}")
    return DTYPE_FORMATS[tensors[0].dtype]


def _planes(x: torch.Tensor, dims: int) -> np.ndarray:
    """The patterns of ``x`` as (planes, plane size): every leading dimension is a plane."""
    plane = int(np.prod(x.shape[x.dim() - dims:], dtype=np.int64))
    return bits(x).reshape(-1, plane)


def _order_key(patterns: np.ndarray, fmt: Format) -> np.ndarray:
    """Integers ordered as the values compare with ``>`` (-0 equal to +0; NaNs not handled)."""
    wide = patterns.astype(np.int64)
    magnitude = wide & fmt.magnitude_mask
    return np.where(wide & fmt.sign_mask, -magnitude, magnitude)


def _select_max(machine: Machine, planes: np.ndarray, windows: Windows, fmt: Format, op: str):
    """(values, indices) of max pooling: (planes, P) patterns and int64 positions."""
    if not windows.valid.any(axis=1).all():
        raise NotEmulated(f"{op}: a window with no element inside the input")
    gathered = planes[:, windows.positions]  # (B, P, K)
    key = np.where(windows.valid, _order_key(gathered, fmt), np.iinfo(np.int64).min)
    chosen = np.argmax(key, axis=2)  # the first maximum
    nan = fmt.is_nan(gathered) & windows.valid
    has_nan = nan.any(axis=2)
    if has_nan.any():
        last_nan = nan.shape[2] - 1 - np.argmax(nan[:, :, ::-1], axis=2)
        chosen = np.where(has_nan, last_nan, chosen)
    values = np.take_along_axis(gathered, chosen[:, :, None], axis=2)[:, :, 0]
    if has_nan.any():
        values = np.where(has_nan, machine.propagate_nan(fmt, values), values)
    indices = windows.positions[np.arange(windows.positions.shape[0])[None, :], chosen]
    return values, indices.astype(np.int64)


def _window_sums(machine: Machine, planes: np.ndarray, windows: Windows, fmt: Format,
                 accumulate: Format | None = None) -> np.ndarray:
    """FP32 sums (B, P) of each window's in-bounds elements in window order, as ``sum`` sums a
    row (in ``accumulate`` if given, else the machine's): windows are grouped by their element
    count so that every sum has exactly its terms."""
    counts = windows.valid.sum(axis=1)
    sums = np.zeros((planes.shape[0], counts.size), dtype=np.uint32)  # empty windows: +0
    for count in np.unique(counts):
        if count == 0:
            continue
        chosen = np.flatnonzero(counts == count)
        positions = windows.positions[chosen][windows.valid[chosen]].reshape(chosen.size, count)
        rows = planes[:, positions].reshape(-1, count)
        sums[:, chosen] = row_sums(machine, rows, fmt, accumulate).reshape(planes.shape[0], chosen.size)
    return sums


def _format_add(machine: Machine, fmt: Format, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` of two ``fmt`` arrays as torch's ``half += half``: an FP32 step, one rounding."""
    return machine.narrow(machine.add(machine.widen(a, fmt), machine.widen(b, fmt)), fmt)


def _scatter_add(machine: Machine, fmt: Format, shape: tuple, targets: np.ndarray, sources: np.ndarray,
                 values: np.ndarray) -> np.ndarray:
    """A (R, L) array of ``fmt`` patterns, from +0, to which ``values[:, sources[j]]`` is added at
    ``targets[j]`` for j in order, each addition rounded into ``fmt`` (``values``: (R, S))."""
    total = np.zeros(shape, dtype=fmt.dtype)
    if targets.size == 0:
        return total
    order = np.argsort(targets, kind="stable")
    ordered = targets[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(ordered.size), 0))
    rank = np.empty(ordered.size, dtype=np.int64)
    rank[order] = np.arange(ordered.size) - group_start
    for r in range(int(rank.max()) + 1):  # one vectorised step per rank: targets are unique within it
        step = rank == r
        where, what = targets[step], sources[step]
        total[:, where] = _format_add(machine, fmt, total[:, where], values[:, what])
    return total


def _spread(machine: Machine, fmt: Format, shares: np.ndarray, windows: Windows, plane: int) -> np.ndarray:
    """Each output's share (B, P) added to the positions of its window, outputs in order."""
    outputs, positions = windows.pairs()
    return _scatter_add(machine, fmt, (shares.shape[0], plane), positions, outputs, shares)


def _divide_each(machine: Machine, fmt: Format, patterns: np.ndarray, divisors: list[np.ndarray],
                 round_each: bool) -> np.ndarray:
    """``x / d1 / d2 ...``, each division an FP32 step. Without ``round_each``: FP32 patterns
    divided by the integers as FP32 numbers, FP32 patterns out. With it: torch's ``scalar_t /
    int64_t`` on ``fmt`` patterns: the integer converted to the format, each quotient rounded into
    it, ``fmt`` patterns out."""
    result = patterns
    for divisor in divisors:
        integers = np.asarray(divisor, dtype=np.int64)
        if round_each:
            converted = _integer_bits(integers, fmt)
            result = machine.narrow(machine.div(machine.widen(result, fmt), machine.widen(converted, fmt)), fmt)
        else:
            result = machine.div(result, FP32.from_float(integers))
    return np.asarray(result)


def _integer_bits(integers: np.ndarray, fmt: Format) -> np.ndarray:
    """Integers as torch converts an ``int64_t`` into the format (via float, to nearest even)."""
    unique, inverse = np.unique(integers, return_inverse=True)
    converted = np.array([scalar_bits(int(v), fmt) for v in unique], dtype=fmt.dtype)
    return converted[inverse].reshape(integers.shape)


def _dims_of(op: str) -> int:
    return 3 if "3d" in op else 2


def _result(patterns: np.ndarray, like, dtype: torch.dtype) -> torch.Tensor:
    """The result's values (row-major) laid out as torch lays out ``like`` (the op's meta result:
    channels-last stays channels-last)."""
    return from_bits(patterns, dtype, laid_out(like.shape, like.stride()))


def _indices(indices: np.ndarray, like) -> torch.Tensor:
    """Max pooling's indices (row-major) laid out as ``like``."""
    return with_layout(torch.from_numpy(indices.reshape(like.shape)), laid_out(like.shape, like.stride()))


# -- max pooling ------------------------------------------------------------------------------------
@implements("max_pool2d_with_indices", "max_pool3d_with_indices", inplace=False)
def max_pool_with_indices(machine, func, args, kwargs):
    """Max pooling (values and int64 indices): exact selection, the first maximum or the last NaN
    of each window (torch CPU's rule)."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    x = args[0]
    out, out_indices = meta_call(func, args, kwargs)
    fmt = _format(op, x)
    dims = _dims_of(op)
    kernel = per_dim(aten_arg(args, kwargs, 1, "kernel_size"), dims, "kernel_size", op)
    stride = per_dim(aten_arg(args, kwargs, 2, "stride"), dims, "stride", op, default=kernel)
    padding = per_dim(aten_arg(args, kwargs, 3, "padding", 0), dims, "padding", op)
    dilation = per_dim(aten_arg(args, kwargs, 4, "dilation", 1), dims, "dilation", op)
    windows = fixed_windows(tuple(x.shape[-dims:]), tuple(out.shape[-dims:]), kernel, stride, padding, dilation)
    values, indices = _select_max(machine, _planes(x, dims), windows, fmt, op)
    return _result(values, out, x.dtype), _indices(indices, out_indices)


@implements("adaptive_max_pool2d", "adaptive_max_pool3d", inplace=False)
def adaptive_max_pool(machine, func, args, kwargs):
    """Adaptive max pooling (values and indices), with max pooling's selection rule."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    x = args[0]
    out, out_indices = meta_call(func, args, kwargs)
    fmt = _format(op, x)
    dims = _dims_of(op)
    windows, _ = adaptive_windows(tuple(x.shape[-dims:]), tuple(out.shape[-dims:]))
    values, indices = _select_max(machine, _planes(x, dims), windows, fmt, op)
    return _result(values, out, x.dtype), _indices(indices, out_indices)


@implements("max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward", "adaptive_max_pool2d_backward",
            "adaptive_max_pool3d_backward", inplace=False)
def max_pool_backward(machine, func, args, kwargs):
    """Gradient of max pooling: each output's gradient added at its index, outputs in row-major
    order, every addition rounded into the format (torch CPU's ``grad_input[i] += grad``)."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    grad, x = args[0], args[1]
    indices = aten_arg(args, kwargs, 2, "indices") if "adaptive" in op else aten_arg(args, kwargs, 7, "indices")
    out = meta_call(func, args, kwargs)
    fmt = _format(op, grad, x)
    dims = _dims_of(op)
    plane = int(np.prod(x.shape[-dims:], dtype=np.int64))
    grads = _planes(grad, dims)
    where = indices.detach().contiguous().numpy().astype(np.int64).reshape(grads.shape)
    if (where >= plane).any():
        raise ValueError(f"{op}: an index of {int(where.max())} in a pooled plane of {plane} elements")
    targets = where + np.arange(grads.shape[0])[:, None] * plane
    keep = where.ravel() >= 0  # torch skips an index of -1
    sources = np.arange(grads.size)[keep]
    total = _scatter_add(machine, fmt, (1, grads.shape[0] * plane), targets.ravel()[keep], sources,
                         grads.reshape(1, -1))
    return _result(total, out, x.dtype)


# -- average pooling --------------------------------------------------------------------------------
def _avg_args(args, kwargs, dims: int, op: str, backward: bool):
    base = 2 if backward else 1  # backward: (grad_output, self, kernel_size, ...)
    kernel = per_dim(aten_arg(args, kwargs, base, "kernel_size"), dims, "kernel_size", op)
    stride = per_dim(aten_arg(args, kwargs, base + 1, "stride"), dims, "stride", op, default=kernel)
    padding = per_dim(aten_arg(args, kwargs, base + 2, "padding", 0), dims, "padding", op)
    ceil_mode = aten_arg(args, kwargs, base + 3, "ceil_mode", False)
    count_include_pad = aten_arg(args, kwargs, base + 4, "count_include_pad", True)
    divisor_override = aten_arg(args, kwargs, base + 5, "divisor_override")
    del ceil_mode  # only the output size depends on it, and torch's meta function computes that
    return kernel, stride, padding, count_include_pad, divisor_override


def _avg_divisors(sizes, out_sizes, kernel, stride, padding, count_include_pad, divisor_override) -> np.ndarray:
    """Each output's divisor, as torch CPU computes it: the override, or the window's extent
    clipped to the padded input (count_include_pad), or its count of in-bounds elements."""
    if divisor_override is not None:
        return np.full(int(np.prod(out_sizes, dtype=np.int64)), int(divisor_override), dtype=np.int64)
    extents = []
    for size, out, k, s, p in zip(sizes, out_sizes, kernel, stride, padding):
        start = np.arange(out) * s - p
        end = np.minimum(start + k, size + p)
        extents.append((end - start) if count_include_pad else (np.minimum(end, size) - np.maximum(start, 0)))
    total = np.ones((), np.int64)
    for extent in extents:
        total = np.multiply.outer(total, extent)
    return total.reshape(-1)


@implements("avg_pool2d", "avg_pool3d", inplace=False)
def avg_pool(machine, func, args, kwargs):
    """Average pooling: the window's in-bounds elements summed as ``sum`` sums (FP32 sequential
    by default: torch CPU's loop), divided in FP32 by the divisor, one rounding."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    x = args[0]
    out = meta_call(func, args, kwargs)
    fmt = _format(op, x)
    dims = _dims_of(op)
    kernel, stride, padding, include_pad, override = _avg_args(args, kwargs, dims, op, backward=False)
    sizes, out_sizes = tuple(x.shape[-dims:]), tuple(out.shape[-dims:])
    windows = fixed_windows(sizes, out_sizes, kernel, stride, padding, (1,) * dims)
    sums = _window_sums(machine, _planes(x, dims), windows, fmt)
    divisors = _avg_divisors(sizes, out_sizes, kernel, stride, padding, include_pad, override)
    quotients = _divide_each(machine, fmt, sums, [divisors[None, :]], round_each=False)
    empty = ~windows.valid.any(axis=1)
    quotients = np.where(empty[None, :], np.uint32(0), quotients)  # torch writes 0 for an empty window
    return _result(machine.narrow(quotients, fmt), out, x.dtype)


@implements("avg_pool2d_backward", "avg_pool3d_backward", inplace=False)
def avg_pool_backward(machine, func, args, kwargs):
    """Gradient of average pooling: ``share = grad / divisor`` (divisor converted to the format,
    the quotient rounded into it), added to every in-bounds position of the window, outputs in
    row-major order, each addition rounded into the format (torch CPU's loop)."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    grad, x = args[0], args[1]
    out = meta_call(func, args, kwargs)
    fmt = _format(op, grad, x)
    dims = _dims_of(op)
    kernel, stride, padding, include_pad, override = _avg_args(args, kwargs, dims, op, backward=True)
    sizes, out_sizes = tuple(x.shape[-dims:]), tuple(grad.shape[-dims:])
    windows = fixed_windows(sizes, out_sizes, kernel, stride, padding, (1,) * dims)
    divisors = _avg_divisors(sizes, out_sizes, kernel, stride, padding, include_pad, override)
    grads = _planes(grad, dims)
    shares = _divide_each(machine, fmt, grads, [divisors[None, :]], round_each=True)
    total = _spread(machine, fmt, shares, windows, int(np.prod(sizes, dtype=np.int64)))
    return _result(total, out, x.dtype)


@implements("_adaptive_avg_pool2d", "_adaptive_avg_pool3d", inplace=False)
def adaptive_avg_pool(machine, func, args, kwargs):
    """Adaptive average pooling: the window summed as ``sum`` sums, then divided by each
    dimension's window length in turn (``sum / kh / kw``, FP32 steps), one rounding. 3-d, as
    torch CPU's 3-d kernel: the sum accumulates in the tensor's format (each addition rounded
    into it, in the machine's order) and each division is rounded into the format."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    x = args[0]
    out = meta_call(func, args, kwargs)
    fmt = _format(op, x)
    dims = _dims_of(op)
    sizes, out_sizes = tuple(x.shape[-dims:]), tuple(out.shape[-dims:])
    windows, lengths = adaptive_windows(sizes, out_sizes)
    if dims == 3:
        sums = machine.narrow(_window_sums(machine, _planes(x, dims), windows, fmt, accumulate=fmt), fmt)
        return _result(_divide_each(machine, fmt, sums, _length_grids(lengths), round_each=True), out, x.dtype)
    sums = _window_sums(machine, _planes(x, dims), windows, fmt)
    quotients = _divide_each(machine, fmt, sums, _length_grids(lengths), round_each=False)
    return _result(machine.narrow(quotients, fmt), out, x.dtype)


def _length_grids(lengths: list[np.ndarray]) -> list[np.ndarray]:
    """Each dimension's window length broadcast to every output (1, P), in row-major order."""
    grids = np.meshgrid(*lengths, indexing="ij")
    return [grid.reshape(1, -1) for grid in grids]


@implements("_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward", inplace=False)
def adaptive_avg_pool_backward(machine, func, args, kwargs):
    """Gradient of adaptive average pooling: ``share = grad / kh / kw`` (each length converted to
    the format, each quotient rounded into it), spread as ``avg_pool2d_backward`` spreads it."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    grad, x = args[0], args[1]
    out = meta_call(func, args, kwargs)
    fmt = _format(op, grad, x)
    dims = _dims_of(op)
    sizes, out_sizes = tuple(x.shape[-dims:]), tuple(grad.shape[-dims:])
    windows, lengths = adaptive_windows(sizes, out_sizes)
    shares = _divide_each(machine, fmt, _planes(grad, dims), _length_grids(lengths), round_each=True)
    total = _spread(machine, fmt, shares, windows, int(np.prod(sizes, dtype=np.int64)))
    return _result(total, out, x.dtype)


# -- reflection and replication padding (nn.Conv*d's padding_mode="reflect" / "replicate") --------
def _padding_sources(sizes: tuple, padding: list, reflect: bool) -> np.ndarray:
    """For every position of the padded plane (row-major), the flat input position it copies."""
    dims = len(sizes)
    flat = np.zeros((), np.int64)
    for i, size in enumerate(sizes):
        # torch's padding list runs from the last dimension: (left, right) of dim -1 first
        before, after = padding[2 * (dims - 1 - i)], padding[2 * (dims - 1 - i) + 1]
        position = np.arange(-before, size + after)
        if reflect:
            position = np.abs(position)
            position = np.where(position >= size, 2 * (size - 1) - position, position)
        else:
            position = np.clip(position, 0, size - 1)
        shape = [1] * dims
        shape[i] = position.size
        flat = flat * size + position.reshape(shape)
    return flat.reshape(-1)


@implements("reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
            "replication_pad3d", inplace=False)
def padding_copy(machine, func, args, kwargs):
    """Reflection / replication padding: copies of input elements (exact), run by torch."""
    return func(*args, **kwargs)


@implements("reflection_pad1d_backward", "reflection_pad2d_backward", "reflection_pad3d_backward",
            "replication_pad1d_backward", "replication_pad2d_backward", "replication_pad3d_backward", inplace=False)
def padding_copy_backward(machine, func, args, kwargs):
    """Gradient of reflection / replication padding: each padded position's gradient added to the
    input position it copied, padded positions in row-major order, each addition rounded into the
    format (torch CPU's loop)."""
    op = f"aten.{func.overloadpacket.__name__}"
    if func._overloadname != "default":
        raise NotEmulated(f"{op}.{func._overloadname}")
    grad, x, padding = args[0], args[1], list(aten_arg(args, kwargs, 2, "padding"))
    out = meta_call(func, args, kwargs)
    fmt = _format(op, grad, x)
    dims = int(op[-len("1d_backward")])
    sources = _padding_sources(tuple(x.shape[-dims:]), padding, reflect=op.startswith("aten.reflection"))
    total = _scatter_add(machine, fmt, (int(np.prod(x.shape[:-dims], dtype=np.int64)), int(np.prod(
        x.shape[-dims:], dtype=np.int64))), sources, np.arange(sources.size), _planes(grad, dims))
    return _result(total, out, x.dtype)
