"""Sums and dot products with an explicit accumulation order: reductions reproducible to the bit.

A floating-point sum is defined by its order: every addition rounds, so the same numbers added in
another order give other bits. :func:`sum` and :func:`dot` take the order as an argument, add in
the accumulation format (FP32 by default) with each addition rounded once, and round the finished
sum once more to the output format, as :func:`softfloat16.linalg.matmul` does. The orders, over
the terms ``x0, x1, ..., x(K-1)`` of one result (``+`` is one rounded addition):

``"sequential"``
    ``((+0 + x0) + x1) + ... + x(K-1)``: a CPU loop, an explicit CUDA k-loop. It starts from +0
    (IEEE: +0 + -0 = +0), so -0 terms alone sum to +0, as numpy's ``np.sum`` and matmul's
    sequential order give.
``"pairwise"``
    the binary tree of ``matmul(..., order="pairwise")`` (``softfloat16._kernels.matmul.pairwise_row``),
    so that a sum and a matmul with a column of ones agree: the terms are pushed one by one onto
    a stack of partial sums, and while the two newest cover equally many terms they are replaced
    by their sum; at the end the rest are added newest first. For K a power of two this is the
    balanced tree ``((x0 + x1) + (x2 + x3)) + ...``; K = 1 gives ``+0 + x0``.
``"blocked"``
    how one CUDA thread block (or warp) of ``block`` threads reduces: thread ``l`` adds
    ``x[l], x[l + block], x[l + 2*block], ...`` to its own sum, which starts at +0 (the
    grid-stride loop ``for (i = tid; i < n; i += blockDim.x) s += x[i];``); then the threads'
    sums are combined by halving, ``s[l] = s[l] + s[l + offset]`` for offset = P/2, P/4, ..., 1
    (P = the power of two >= ``block``; a thread at or beyond ``block`` is absent), and the
    result is ``s[0]``. This is the shared-memory "sequential addressing" reduction of M. Harris,
    "Optimizing Parallel Reduction in CUDA" (NVIDIA, 2007), and with ``block=32`` the warp
    reduction ``s += __shfl_down_sync(mask, s, offset)`` for offset = 16, 8, 4, 2, 1 (J. Luitjens,
    "Faster Parallel Reductions on Kepler", NVIDIA blog, 2014). Threads without a term keep +0
    and take part in the tree, as they do on the GPU. A given library's kernel (cuBLAS, torch's
    ``sum``) may load several terms per thread or split the work across blocks: check it before
    relying on this order to reproduce it.
``"numpy"`` (:func:`sum` only)
    ``np.sum`` / ``np.add.reduce`` of a float32 or float16 array, as numpy 2.4 reduces (the tests
    check it against the installed numpy): each run of terms numpy's reduction loop receives is summed
    by numpy's ``pairwise_sum`` (``numpy/_core/src/umath/loops_utils.h.src``): below 8 terms one
    by one from -0; up to 128 terms, 8 accumulators starting at ``x0 ... x7``, accumulator j
    adding ``x(8i + j)`` for the largest multiple of 8 terms, combined as
    ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the remaining ``K % 8`` terms one
    by one; above 128 terms, split after ``n2 = K // 2 - (K // 2) % 8`` terms, both parts summed
    so, then added. These run sums are added in turn to a total that starts at +0, which is rounded
    to ``out_format`` after each addition (numpy stores it in the array's dtype: float16 sums
    are computed in float32 but stored as float16 between runs). Which terms form a run follows
    numpy's iteration of a C-contiguous array: the trailing reduced axes (those after the last
    kept axis of length > 1; all of them for ``axis=None``) form one run per result, in C order,
    and any other reduced axis is walked one index at a time, in C order. So ``axis=-1`` sums each
    row pairwise, and ``axis=0`` of a 2-D array adds the rows one by one (the sequential order).
    For a Fortran-ordered or transposed array numpy walks memory order instead: compare with
    ``np.sum(np.ascontiguousarray(x), axis)``.

Multi-axis reductions (other than ``"numpy"``) take the terms of the reduced axes in C order, as
``x.transpose(kept + reduced).reshape(M, K)`` would lay them out. IEEE rules apply throughout:
an addition of zeros of opposite signs gives +0 (-0 when rounding down), an empty sum is +0,
inf - inf and any NaN give the output format's default NaN (+qNaN, only the quiet bit set:
payloads are not propagated). Subnormals are kept (no FTZ/DAZ); no flags are returned.
"""
from __future__ import annotations

import operator

import numpy as np

from ._kernels import reduce as kernels
from ._kernels.loops import FAST_MAX_FRACTION_BITS
from . import host_gemm
from .formats import Format, fp32
from .formats import format as parse_format
from .ops import as_bits, convert
from .rounding import Rounding, parse_rounding

__all__ = ["DOT_ORDERS", "ORDERS", "dot", "sum"]

ORDERS = ("sequential", "pairwise", "blocked", "numpy")
DOT_ORDERS = ("sequential", "pairwise", "blocked")
MAX_BLOCK = 1 << 16


def _formats(fmt, accumulate, out_format, b_format=None) -> tuple[Format, Format, Format, Format]:
    fmt = parse_format(fmt)
    b_format = fmt if b_format is None else parse_format(b_format)
    accumulate, out_format = parse_format(accumulate), fmt if out_format is None else parse_format(out_format)
    for name, f in (("fmt", fmt), ("b_format", b_format)):
        if not f.has_arithmetic:
            raise ValueError(f"{name}: {f.name} is a scale format; it has no sums or products")
        if f.storage_shift:
            raise ValueError(f"{name}: {f.name} (TF32 in FP32 layout) is not taken here; use tf32")
    for name, f in (("fmt", fmt), ("b_format", b_format), ("accumulate", accumulate)):
        if f.precision > 24 or f.exponent_bits > 8:  # what the wide carrier holds, products included
            raise ValueError(f"{name}: {f.name} is wider than FP32; reductions take formats of at most 24 "
                             "significand and 8 exponent bits")
    for name, f in (("accumulate", accumulate), ("out_format", out_format)):
        if not f.ieee_like or f.storage_shift:
            raise ValueError(f"{name}: {f.name} is not an IEEE-encoded format; accumulate and write results in "
                             "fp32, bf16, fp16, tf32 or fp8_e5m2, and convert the result with sf.convert")
    return fmt, b_format, accumulate, out_format


def _check_order(order: str, accepted: tuple[str, ...], what: str) -> None:
    if order not in accepted:
        extra = ""
        if order == "numpy" and what == "dot":
            extra = " (np.dot calls BLAS, whose order numpy does not define)"
        raise ValueError(f"order: unknown {what} order {order!r}{extra}; accepted: {', '.join(accepted)}")


def _check_block(block) -> int:
    if isinstance(block, (bool, np.bool_)) or not isinstance(block, (int, np.integer)) or not (
            1 <= block <= MAX_BLOCK):
        raise ValueError(f"block: expected an integer in [1, {MAX_BLOCK}] (threads of the blocked order), "
                         f"got {block!r}")
    return int(block)


def _rounding(rounding) -> int:
    mode = parse_rounding(rounding)
    if mode == Rounding.SR:
        raise ValueError("rounding: reductions have no stochastic rounding ('sr'); round an FP32 result with "
                         "sf.convert(..., rounding='sr', seed=...)")
    return int(mode)


def _axes(axis, ndim: int) -> tuple[int, ...]:
    """The reduced axes, sorted and non-negative."""
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = []
    for item in items:
        try:
            if isinstance(item, (bool, np.bool_)):
                raise TypeError
            index = operator.index(item)
        except TypeError:
            raise ValueError(f"axis: expected None, an integer or a tuple of integers, got {axis!r}") from None
        if not -ndim <= index < ndim:
            raise ValueError(f"axis: {index} is out of range for an array with {ndim} axes")
        axes.append(index % ndim)
    if len(set(axes)) != len(axes):
        raise ValueError(f"axis: repeated axis in {axis!r}")
    return tuple(sorted(axes))


def _holds(small: Format, large: Format) -> bool:
    """Whether every finite value of ``small`` is a value of ``large`` (an IEEE format: it has the
    infinities and NaNs too), and fast.add_normal takes ``large``: the accumulation format can carry
    the terms (kernels.Spec.fast)."""
    return (small.precision <= large.precision and small.emax <= large.emax
            and small.min_subnormal_exponent >= large.min_subnormal_exponent
            and large.fraction_bits <= FAST_MAX_FRACTION_BITS)


def _holds_products(a: Format, b: Format, large: Format) -> bool:
    """Whether every product of a value of ``a`` and one of ``b`` is a value of ``large`` (and
    fast.add_normal takes ``large``)."""
    return (a.precision + b.precision <= large.precision and a.emax + b.emax + 1 <= large.emax
            and a.min_subnormal_exponent + b.min_subnormal_exponent >= large.min_subnormal_exponent
            and large.fraction_bits <= FAST_MAX_FRACTION_BITS)


def _spec(fast: bool, accumulate: Format, out_format: Format, mode: int, block: int) -> kernels.Spec:
    carrier = (accumulate.exponent_bits, accumulate.fraction_bits) if fast else kernels.WIDE
    return kernels.Spec(int(fast), *carrier, accumulate.exponent_bits, accumulate.fraction_bits,
                        out_format.exponent_bits, out_format.fraction_bits, mode, block)


def _carrier(bits: np.ndarray, fmt: Format, accumulate: Format, fast: bool) -> np.ndarray:
    """Terms as carrier patterns (exact): uint32 patterns of ``accumulate`` when fast, else int64
    patterns of the wide carrier."""
    if fast:
        if fmt is not accumulate:
            bits = convert(bits, src=fmt, dst=accumulate)  # exact: accumulate holds every value of fmt
        return np.ascontiguousarray(bits, dtype=np.uint32)
    flat = np.ascontiguousarray(bits).reshape(-1)
    out = np.empty(flat.size, np.int64)
    kernels.widen(flat, out, fmt.exponent_bits, fmt.fraction_bits, fmt.encoding_code, *kernels.WIDE)
    return out.reshape(bits.shape)


# Many sums of fewer terms than this run side by side (kernels.sequential_lanes); longer ones one by one.
_SHORT_SUM = 128


def _kernel_name(order: str, fast: bool, m: int, k: int) -> str:
    if order == "sequential" and fast and m >= kernels.LANES // 2 and k < _SHORT_SUM:
        return "sequential_lanes"
    return order


def _layout(bits: np.ndarray, axes: tuple[int, ...], kernel: str) -> np.ndarray:
    """The terms as the kernel takes them: (M, K), (K, M) for sequential_lanes, (M, O, T) for numpy
    (see the module docstring)."""
    shape = bits.shape
    kept = [d for d in range(bits.ndim) if d not in axes]
    m = int(np.prod([shape[d] for d in kept], dtype=np.int64))
    k = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    if kernel == "sequential_lanes":
        return np.ascontiguousarray(bits.transpose(list(axes) + kept)).reshape(k, m)
    if kernel != "numpy":
        return np.ascontiguousarray(bits.transpose(kept + list(axes))).reshape(m, k)
    run = []  # the trailing reduced axes numpy's inner loop covers at once
    for d in reversed(range(bits.ndim)):
        if shape[d] == 1:
            continue
        if d not in axes:
            break
        run.insert(0, d)
    walked = [d for d in axes if d not in run]
    t = int(np.prod([shape[d] for d in run], dtype=np.int64))
    return np.ascontiguousarray(bits.transpose(kept + walked + run)).reshape(m, k // max(t, 1), t)


def _finish(out: np.ndarray, out_format: Format, shape: tuple[int, ...]):
    result = out.astype(out_format.dtype, copy=False).reshape(shape)
    return result[()] if result.ndim == 0 else result


def _rounded(totals: np.ndarray, out_format: Format, rounding: str) -> np.ndarray:
    """FP32 bits of finished sums (the host's, softfloat16.host_gemm) rounded once to out_format."""
    return totals if out_format is fp32 else np.asarray(convert(totals, src=fp32, dst=out_format, rounding=rounding))


def _reduce(terms: np.ndarray, kernel: str, spec: kernels.Spec, m: int, k: int) -> np.ndarray:
    out = np.zeros(m, np.uint32)  # an empty sum is +0
    if m and k:
        kernels.KERNELS[kernel](terms, out, spec)
    return out


def sum(  # noqa: A001 - sf.linalg.sum, as the API names it
    x,
    fmt: Format | str,
    axis: int | tuple[int, ...] | None = None,
    accumulate: Format | str = fp32,
    out_format: Format | str | None = None,
    order: str = "sequential",
    block: int = 32,
    rounding: str = "rne",
    *,
    keepdims: bool = False,
) -> np.ndarray | np.unsignedinteger:
    """The sum of ``x``'s values along ``axis``, added in ``order``, each addition rounded once to
    ``accumulate``; the finished sum is rounded once more to ``out_format`` (default ``fmt``).

    ``x``: bit patterns of ``fmt`` (or a float array of its width). ``axis``: None (every axis),
    an integer or a tuple of them; ``keepdims`` keeps the reduced axes with length 1. ``order``:
    ``"sequential"``, ``"pairwise"``, ``"blocked"`` (``block`` threads) or ``"numpy"``, defined in
    the module docstring (:mod:`softfloat16.reductions`). ``rounding`` applies to every addition
    and to the final conversion. Result: bit patterns of ``out_format``, an array of the kept
    axes' shape (a numpy scalar when every axis is reduced).

    >>> import numpy as np, softfloat16 as sf
    >>> x = np.array([1.0, 2.0**-24, 2.0**-24], dtype=np.float32)
    >>> float(sf.fp32.to_float(sf.linalg.sum(x, sf.fp32)))   # each 2**-24 is lost on its own: ties to even
    1.0
    >>> float(sf.fp32.to_float(sf.linalg.sum(x, sf.fp32, order="pairwise")))   # (x0 + x1) + x2, the same
    1.0
    >>> float(sf.fp32.to_float(sf.linalg.sum(x[::-1], sf.fp32)))   # the small ones first: they add up
    1.0000001192092896
    >>> y = np.random.default_rng(0).standard_normal((3, 1000)).astype(np.float32)
    >>> bool((sf.linalg.sum(y, sf.fp32, axis=1, order="numpy") == np.sum(y, axis=1).view(np.uint32)).all())
    True
    >>> h = np.float16([0.1] * 3000)   # numpy: float32 pairwise sums, stored as float16
    >>> bool(sf.linalg.sum(h, sf.fp16, order="numpy") == np.sum(h).view(np.uint16))
    True
    """
    fmt, _, accumulate, out_format = _formats(fmt, accumulate, out_format)
    _check_order(order, ORDERS, "sum")
    block = _check_block(block)
    mode = _rounding(rounding)
    bits = as_bits(x, fmt, "x")
    axes = _axes(axis, bits.ndim)
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims: expected True or False, got {keepdims!r}")
    shape = tuple(1 if d in axes else n for d, n in enumerate(bits.shape)) if keepdims else tuple(
        n for d, n in enumerate(bits.shape) if d not in axes)
    m = int(np.prod(shape, dtype=np.int64))
    k = int(np.prod([bits.shape[d] for d in axes], dtype=np.int64))
    if order in ("sequential", "pairwise") and m >= host_gemm.SUM_MIN_RESULTS:  # the host's arithmetic
        leading = axes == tuple(range(len(axes)))  # (k, m) without a copy: a column per sum
        layout = _layout(bits, axes, "sequential_lanes" if leading else order)
        totals = host_gemm.sums(layout, fmt, accumulate, order, mode, leading)
        if totals is not None:
            return _finish(_rounded(totals, out_format, rounding), out_format, shape)
    fast = _holds(fmt, accumulate)
    kernel = _kernel_name(order, fast, m, k)
    terms = _carrier(_layout(bits, axes, kernel), fmt, accumulate, fast)
    return _finish(_reduce(terms, kernel, _spec(fast, accumulate, out_format, mode, block), m, k), out_format, shape)


def dot(
    a,
    b,
    fmt: Format | str,
    accumulate: Format | str = fp32,
    out_format: Format | str | None = None,
    order: str = "sequential",
    block: int = 32,
    rounding: str = "rne",
    b_format: Format | str | None = None,
) -> np.ndarray | np.unsignedinteger:
    """``sum(a[..., i] * b[..., i])`` over the last axis: exact products added in ``order`` (as
    :func:`sum` defines it: ``"sequential"``, ``"pairwise"`` or ``"blocked"``), each addition rounded
    once to ``accumulate``, the finished sum rounded once more to ``out_format`` (default ``fmt``).

    ``a``: bit patterns of ``fmt``, ``b`` of ``b_format`` (default ``fmt``), or float arrays of
    their widths; their last axes have the same length, the other axes broadcast (1-D vectors give
    a numpy scalar). Products are exact (as in :func:`softfloat16.linalg.matmul`); one outside the
    accumulation format's range overflows or underflows when it is first added. ``dot`` has no
    ``"numpy"`` order: ``np.dot`` calls BLAS, whose order numpy does not define.

    >>> import numpy as np, softfloat16 as sf
    >>> a = sf.fp16.from_float(np.array([1.0, 2.0**-12, 2.0**-12]))
    >>> ones = sf.fp16.from_float(np.ones(3))
    >>> float(sf.fp16.to_float(sf.linalg.dot(a, ones, sf.fp16)))   # 1 + 2**-11 in FP32, then a tie in FP16
    1.0
    >>> float(sf.fp32.to_float(sf.linalg.dot(a, ones, sf.fp16, out_format=sf.fp32)))
    1.00048828125
    >>> float(sf.fp32.to_float(sf.linalg.dot(a, ones, sf.fp16, accumulate=sf.fp16, out_format=sf.fp32)))
    1.0
    """
    fmt, b_format, accumulate, out_format = _formats(fmt, accumulate, out_format, b_format)
    _check_order(order, DOT_ORDERS, "dot")
    block = _check_block(block)
    mode = _rounding(rounding)
    a_bits, b_bits = as_bits(a, fmt, "a"), as_bits(b, b_format, "b")
    if a_bits.ndim == 0 or b_bits.ndim == 0:
        raise ValueError(f"a and b: expected arrays with at least one axis, got shapes {a_bits.shape} and "
                         f"{b_bits.shape}")
    if a_bits.shape[-1] != b_bits.shape[-1]:
        raise ValueError(f"a and b: the last axes differ in length, a{a_bits.shape} and b{b_bits.shape}")
    try:
        shape = np.broadcast_shapes(a_bits.shape[:-1], b_bits.shape[:-1])
    except ValueError:
        raise ValueError(f"a and b: the leading axes do not broadcast, a{a_bits.shape} and b{b_bits.shape}") from None
    k = a_bits.shape[-1]
    m = int(np.prod(shape, dtype=np.int64))
    if order in ("sequential", "pairwise") and m >= host_gemm.SUM_MIN_RESULTS:
        rows = [np.broadcast_to(bits, (*shape, k)).reshape(m, k) for bits in (a_bits, b_bits)]
        totals = host_gemm.dots(*rows, fmt, b_format, accumulate, order, mode)
        if totals is not None:
            return _finish(_rounded(totals, out_format, rounding), out_format, shape)
    fast = _holds_products(fmt, b_format, accumulate)
    kernel = _kernel_name(order, fast, m, k)
    carrier = (accumulate.exponent_bits, accumulate.fraction_bits) if fast else kernels.WIDE
    flat = []
    for bits in (a_bits, b_bits):
        bits = np.broadcast_to(bits, (*shape, k)).reshape(m, k)
        flat.append(np.ascontiguousarray(bits.T if kernel == "sequential_lanes" else bits).reshape(-1))
    terms = np.empty(flat[0].size, np.uint32 if fast else np.int64)
    kernels.products(flat[0], flat[1], terms, fmt.exponent_bits, fmt.fraction_bits, fmt.encoding_code,
                     b_format.exponent_bits, b_format.fraction_bits, b_format.encoding_code, *carrier)
    terms = terms.reshape((k, m) if kernel == "sequential_lanes" else (m, k))
    return _finish(_reduce(terms, kernel, _spec(fast, accumulate, out_format, mode, block), m, k), out_format, shape)

