"""Linear algebra on bit patterns: a fused matrix multiply with an explicit accumulation policy.

``matmul`` is what a GEMM with a wide accumulator does, spelled out: products of the inputs are
exact, they are added in the accumulation format (FP32 by default) in a defined order, each
addition rounded once, and the finished sum is rounded once more to the output format. So an
FP16 matmul with FP32 accumulation is defined by its order alone, and reproducible to the bit.

``order="tensorcore"`` is the other policy GPUs use: a matrix unit adds a block of exact products
(and the running accumulator) in one multi-operand adder that aligns them, truncates, and
normalises once. It runs on the instruction models of softfloat16.mma: a GPU by name
(``tensor_core="h100"``), an instruction preset, or a :class:`TensorCore` of your own
(softfloat16.tensor_cores).
"""
from __future__ import annotations

import functools
import numpy as np

from ._kernels import matmul as kernels
from ._kernels import hardware, matmul_lanes
from ._kernels.loops import FAST_MAX_FRACTION_BITS
from . import mma
from .host_gemm import _binary32, _embeds, _hardware, _products_in_binary32, _twosum_spec  # noqa: F401
from .formats import Format, bf16, fp16, fp32
from .formats import format as parse_format
from .ops import as_bits, convert
from .reductions import dot, sum  # noqa: A004 - sf.linalg.sum, as the API names it
from .rounding import Rounding, parse_rounding
from .tensor_cores import TENSOR_CORES, TensorCore, resolve
from .threads import parallel_gemm

__all__ = ["ORDERS", "TENSOR_CORES", "TensorCore", "dot", "matmul", "sum"]

ORDERS = kernels.ROWS._fields + ("tensorcore",)  # a row kernel each; tensorcore: softfloat16.mma


@functools.cache
def _lanes_kernel(*constants):
    return kernels.make_sequential_lanes(*constants)


@functools.cache
def _float64_lanes_kernel(order, *constants):
    return {"sequential": matmul_lanes.make_sequential_lanes, "pairwise": matmul_lanes.make_pairwise_lanes}[order](
        *constants)


def _lanes_wasted(columns: int, lanes: int = kernels.LANES) -> int:
    """Padding lanes of a SIMD-lane kernel (``lanes`` wide) for a result this many columns wide."""
    return -columns % lanes


def _float64_lanes(fmt: Format, b_format: Format, accumulate: Format) -> bool:
    """Whether the float64-lane kernels (softfloat16._kernels.matmul_lanes) take this product:
    every value and exact product is then a float64."""
    return max(fmt.exponent_bits, b_format.exponent_bits, accumulate.exponent_bits) <= 8


def _exact_in(fmt: Format, accumulate: Format) -> bool:
    """Whether every product of two ``fmt`` significands fits ``accumulate``'s, and the lane kernel
    (softfloat16._kernels.fast) takes the accumulation format: FP16 or BF16 into FP32."""
    return 2 * fmt.precision <= accumulate.precision and accumulate.fraction_bits <= FAST_MAX_FRACTION_BITS and (
        fmt.exponent_bits <= accumulate.exponent_bits)


def _common_format(a: Format, b: Format) -> Format | None:
    """A 16-bit format holding both ``a`` and ``b`` exactly (E4M3 and E5M2 in FP16), or None."""
    for common in (fp16, bf16):
        if _embeds(a, common) and _embeds(b, common):
            return common
    return None


def _matmul_instruction(a, b, fmt: Format, b_format: Format, accumulate: Format, out_format: Format, rounding: str,
                        p: mma.Preset, split_k: int | None, promote_every: int | None) -> np.ndarray:
    """matmul on a GPU instruction preset (softfloat16.mma.gemm), then one rounding to out_format."""
    for name, given, want in (("fmt", fmt, p.a), ("b_format", b_format, p.b)):
        if given is not parse_format(want):
            raise ValueError(f"{name}: {p.name} takes {want} operands, got {given.name}")
    promoted = split_k not in (None, 1) or promote_every is not None
    acc = fp32 if promoted else parse_format(p.d)
    if accumulate is not acc:
        raise ValueError(f"accumulate: {p.name} accumulates in {acc.name}"
                         f"{' (split_k / promote_every reduce in fp32)' if promoted else ''}; pass accumulate="
                         f"'{acc.name}'")
    a, b = _matrix(a, fmt, "a"), _matrix(b, b_format, "b")
    if a.shape[1] == 0 and b.shape[0] == 0:  # an empty sum: +0, as in the other orders
        return np.zeros((a.shape[0], b.shape[1]), out_format.dtype)
    bits = mma.gemm(a, b, p, split_k=1 if split_k is None else split_k, promote_every=promote_every)
    if out_format is acc:
        return bits
    return np.asarray(convert(bits, src=acc, dst=out_format, rounding=rounding))


def _matrix(x, fmt: Format, name: str) -> np.ndarray:
    bits = as_bits(x, fmt, name)
    if bits.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (a matrix), got shape {bits.shape}")
    return bits


def matmul(
    a,
    b,
    fmt: Format | str,
    accumulate: Format | str = fp32,
    out_format: Format | str | None = None,
    order: str = "sequential",
    rounding: str = "rne",
    tensor_core: TensorCore | str = "h100",
    *,
    b_format: Format | str | None = None,
    split_k: int | None = None,
    promote_every: int | None = None,
) -> np.ndarray:
    """``a @ b`` for bit patterns of ``fmt``: exact products, sums rounded in ``accumulate``.

    ``a``: (m, k), ``b``: (k, n) bit patterns of ``fmt`` (or float arrays of its width); ``b`` may
    hold another format, ``b_format`` (E4M3 activations times E5M2 gradients, as FP8 training
    multiplies them): products stay exact, nothing else changes.
    Result: an (m, n) array of ``out_format`` (default ``fmt``) bit patterns.

    - ``order="sequential"``: ``((0 + a[i,0]*b[0,j]) + a[i,1]*b[1,j]) + ...``, k ascending, the
      loop a plain CPU GEMM reference or an explicit CUDA k-loop performs.
    - ``order="pairwise"``: the products summed as a binary tree (see
      ``softfloat16._kernels.matmul.pairwise_row`` for the exact tree).
    - ``order="tensorcore"``: the GEMM runs on a matrix-unit instruction chained over K exactly as
      the hardware computes it (``softfloat16.mma.gemm``): ``tensor_core`` is a GPU or architecture
      name (default ``"h100"``: the instruction its GEMM kernels issue for ``fmt`` x ``b_format``
      into ``accumulate``, softfloat16.tensor_cores.instruction), an instruction preset
      (``softfloat16.mma.presets()``, e.g. ``"hopper.wgmma.m64n8k32.f32.e4m3.e4m3"``: ``fmt`` and
      ``b_format`` must be its inputs and ``accumulate`` its D format) or a :class:`TensorCore`
      (any input format, FP32 accumulation). The kernel options ``split_k`` and ``promote_every``
      reduce partial results in FP32 (then ``accumulate`` is FP32). ``rounding`` applies only to
      the final conversion to ``out_format``.

    Every addition is rounded once to ``accumulate`` with ``rounding``; the sum is then rounded
    once to ``out_format`` with the same mode. Products are exact for every format of at most 24
    significand bits; a product outside the accumulation format's range (possible for BF16/FP32
    inputs) overflows or underflows when it is first added. Subnormals are kept (no FTZ/DAZ).
    IEEE rules apply to zeros and infinities (the sequential sum starts from +0, so -0 terms
    alone give +0 there; an empty sum is +0 in every order); every NaN result (a NaN input,
    inf * 0, inf - inf) is ``out_format``'s default NaN, +qNaN with only the quiet bit set
    (payloads are not propagated), except in the tensor-core order: there it is the instruction's
    one NaN pattern (0x7fffffff in FP32), converted to ``out_format`` keeping its payload (0x7fff in
    FP16). No flags are returned.

    >>> import numpy as np, softfloat16 as sf
    >>> a = sf.fp16.from_float(np.array([[1.0, 2.0**-11]]))
    >>> b = sf.fp16.from_float(np.array([[1.0], [1.0]]))
    >>> sf.fp32.to_float(matmul(a, b, sf.fp16, out_format=sf.fp32))  # 1 + 2**-11, exact in FP32
    array([[1.00048828]])
    >>> sf.fp16.to_float(matmul(a, b, sf.fp16))  # then one rounding to FP16: a tie, to even
    array([[1.]])
    >>> x = sf.fp16.from_float(np.array([[2.0**-13] * 15 + [1.0]]))   # 15 products 2**-26, then 1
    >>> [float(sf.fp32.to_float(matmul(x, x.T, sf.fp16, out_format=sf.fp32, order=o))[0, 0]) - 1
    ...  for o in ("sequential", "tensorcore")]       # a tensor core truncates the small terms away
    [2.384185791015625e-07, 0.0]
    """
    fmt = parse_format(fmt)
    b_format = fmt if b_format is None else parse_format(b_format)
    accumulate = parse_format(accumulate)
    out_format = fmt if out_format is None else parse_format(out_format)
    if order == "tensorcore":
        promoted = split_k not in (None, 1) or promote_every is not None
        instruction = resolve(tensor_core, fmt, b_format, fp32 if promoted else accumulate)
        return _matmul_instruction(a, b, fmt, b_format, accumulate, out_format, rounding, instruction, split_k,
                                   promote_every)
    for name, value in (("split_k", split_k), ("promote_every", promote_every)):
        if value is not None:
            raise ValueError(f"{name}: only order='tensorcore' (a GPU instruction) takes it")
    if order not in ORDERS:
        raise ValueError(f"order: unknown accumulation order {order!r}; accepted: {', '.join(ORDERS)}")
    mode = int(parse_rounding(rounding))
    if mode == Rounding.SR:
        raise ValueError("rounding: matmul has no stochastic rounding ('sr'); round its FP32 result with "
                         "sf.convert(..., rounding='sr', seed=...)")
    for name, f in (("fmt", fmt), ("b_format", b_format), ("accumulate", accumulate)):
        if f.precision > 24:
            raise ValueError(f"{name}: {f.name} significands are too wide for exact products")
        if f.storage_shift:
            raise ValueError(f"{name}: {f.name} (TF32 in FP32 layout) is not taken here; use tf32")
    for name, f in (("fmt", fmt), ("b_format", b_format)):
        if not f.has_arithmetic:
            raise ValueError(f"{name}: {f.name} is a scale format; it has no products")
    for name, f in (("accumulate", accumulate), ("out_format", out_format)):
        if not f.ieee_like or f.storage_shift:
            raise ValueError(f"{name}: {f.name} is not an IEEE-encoded format; accumulate and write results in "
                             "fp32, bf16, fp16, tf32 or fp8_e5m2, and convert the result with sf.convert")
    a_bits, b_bits = _matrix(a, fmt, "a"), _matrix(b, b_format, "b")
    if a_bits.shape[1] != b_bits.shape[0]:
        raise ValueError(
            f"a and b: inner dimensions differ, a{a_bits.shape} @ b{b_bits.shape}"
        )
    bits = _hardware(a_bits, b_bits, fmt, b_format, accumulate, order, mode)
    if bits is not None:  # None: not provably the model's bits here
        return bits if out_format is fp32 else np.asarray(convert(bits, src=fp32, dst=out_format, rounding=rounding))
    if b_format is not fmt and order == "sequential":
        common = _common_format(fmt, b_format)
        if common is not None:  # exact copies in one format: the same products, the fast kernels
            a_bits, b_bits = (np.asarray(convert(x, src=f, dst=common)) for x, f in ((a_bits, fmt), (b_bits, b_format)))
            return matmul(a_bits, b_bits, common, accumulate, out_format, order, rounding)
    ebits, fbits = fmt.exponent_bits, fmt.fraction_bits
    m, k, n = a_bits.shape[0], a_bits.shape[1], b_bits.shape[1]
    out = np.empty((m, n), dtype=np.uint32)
    use_parallel = parallel_gemm(m, k, n)
    formats = (accumulate.exponent_bits, accumulate.fraction_bits, out_format.exponent_bits,
               out_format.fraction_bits, mode)
    uint32_lanes = order == "sequential" and b_format is fmt and _exact_in(fmt, accumulate)
    float64_lanes = not uint32_lanes and _float64_lanes(fmt, b_format, accumulate)
    lanes = kernels.LANES if uint32_lanes else matmul_lanes.LANES
    if (uint32_lanes or float64_lanes) and _lanes_wasted(m, lanes) < _lanes_wasted(n, lanes):
        # Few columns, more rows: C.T = B.T @ A.T has the same sums in the same order.
        return matmul(b_bits.T, a_bits.T, b_format, accumulate, out_format, order, rounding,
                      b_format=fmt).T.copy()
    if uint32_lanes:
        # Products exact in the accumulation format: the SIMD-lane kernel in uint32.
        kernel = _lanes_kernel(ebits, fbits, fmt.encoding_code, *formats, use_parallel)
        kernel(np.ascontiguousarray(a_bits, dtype=np.uint32), np.ascontiguousarray(b_bits, dtype=np.uint32), out)
        return out.astype(out_format.dtype, copy=False)
    # uint32 in and out for every format: one compiled signature per kernel, not one per dtype.
    unpacked_a = kernels.unpack_matrix(np.ascontiguousarray(a_bits, dtype=np.uint32), ebits, fbits,
                                       fmt.encoding_code)
    unpacked_bt = kernels.unpack_matrix(np.ascontiguousarray(b_bits.T, dtype=np.uint32), b_format.exponent_bits,
                                        b_format.fraction_bits, b_format.encoding_code)
    if float64_lanes:
        acc = (accumulate.exponent_bits, accumulate.fraction_bits)
        outs = (out_format.exponent_bits, out_format.fraction_bits)
        compiled_mode = mode if mode == Rounding.RNE else matmul_lanes.ANY_ROUNDING
        kernel = _float64_lanes_kernel(order, *acc, compiled_mode, use_parallel)
        if kernel(unpacked_a, unpacked_bt, out, *outs, mode, hardware.PROBE)[1]:  # (else: the environment
            return out.astype(out_format.dtype, copy=False)  # could not be made the default)
    kernels.MATMUL[order][use_parallel](unpacked_a, unpacked_bt, out, *formats)
    return out.astype(out_format.dtype, copy=False)
