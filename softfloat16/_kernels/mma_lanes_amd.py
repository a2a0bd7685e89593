"""The AMD CDNA1 / CDNA2 adders and every FP32 FMA chain (``ADD_EXACT``, ``ADD_FTZ_PAIRS``,
``ADD_FTZ_QUADS``, ``ADD_FMA``; softfloat16._kernels.mma) in SIMD lanes of float64, as
softfloat16._kernels.mma_lanes does for the others: LANES output elements of a row take each step
together. The bits are the scalar kernel's (mma.mma_gemm), element for element.

Every value here is an FP32 value or a product of two FP32 / FP16 / BF16 values: a float64 holds it
exactly, and as a normal number (the smallest product is 2**-298), so float64 products are exact
and a multiplication by a power of two is exact. One rounding into FP32 is done in float64 too:

- :func:`rn32` (an exact float64 to FP32, to nearest even): mma_lanes.rounded (the value scaled
  to FP32's quantum at its exponent, at least 2**-149 so that subnormal results keep their bits,
  np.rint, scaled back); a result of 2**128 or more is an infinity (a NaN or infinity passes).
- :func:`rn32_sum` (x + y to FP32 in one rounding): s = x + y in float64 and its exact error e
  (TwoSum: s + e = x + y, with no overflow possible at these magnitudes); if e is not zero and s's
  last bit is even, s moves one float64 ulp toward e: that is x + y rounded to odd at 53 bits, and
  rounding that to nearest even at 24 bits or fewer (p + 2 <= 53) equals rounding x + y once.
  Where s is a NaN or infinity, e is NaN and s stays: IEEE 754's specials (inf - inf is NaN).

The adders, for each output element:

- ``ADD_FMA``: ``c = rn32_sum(a * b, c)`` for each product in order (a * b exact): IEEE 754's FMA,
  NaN and infinities included (the NaN's bits are the scalar kernel's, 0x7fffffff).
- ``ADD_FTZ_*`` (CDNA2): subnormal or zero inputs are +0; each product is rn32 of the float64
  product, then flushed (below 2**-126: the zero of its sign); pairs (and pairs of pairs) and then
  c are added with rn32_sum and flushed; a zero or subnormal c at an instruction's start is +0.
  No flag of the CPU (FTZ, DAZ) takes part: the flushing is explicit. Where the operands' span
  allows (:func:`ftz_plan`), the products skip their rounding, and the sums within a pair or quad
  are plain float64 additions (exact) rounded by rn32.
- ``ADD_EXACT`` (CDNA1): the step's products are added to c with TwoSum; where every error is zero
  the float64 sum is the exact sum, rounded once by rn32 (an exact zero sum is +0). A lane with a
  nonzero error (operands too far apart for 53 bits) or a NaN or infinity anywhere takes the
  scalar step (mma.step_exact) from its accumulator's bits.
"""
import numpy as np
from numba import njit, prange

from .core import FINITE, INF, NAN, ZERO, msb_index
from .environment import NEAREST, PROBE, env_ok, swap_mxcsr
from .fast import bits_float, float_bits
from .mma import ADD_EXACT, ADD_FMA, ADD_FTZ_PAIRS, ADD_FTZ_QUADS, FP32, OUT_RNE_FP32, decode_one
from .mma import mma_gemm as scalar_gemm, step_exact
from .mma_lanes import ROWS, decoded_value, rounded, value_bits

LANES = 64  # output elements of a row side by side (the columns of a tile)

ADDERS = (ADD_EXACT, ADD_FTZ_PAIRS, ADD_FTZ_QUADS, ADD_FMA)
FP32_MIN_NORMAL = 2.0 ** -126
FP32_LIMIT = 2.0 ** 128
u64 = np.uint64


@njit(cache=True, forceinline=True, error_model="numpy")
def rn32(v):
    """An exact float64 rounded to nearest even into FP32 (as a float64; 2**128 and up: inf)."""
    y = rounded(v, -126, 23, True)
    return y if abs(y) < FP32_LIMIT else y * np.inf


@njit(cache=True, forceinline=True, error_model="numpy")
def rn32_sum(x, y):
    """x + y (float64 values) rounded once to nearest even into FP32 (as a float64)."""
    s = x + y
    z = s - x
    e = (x - (s - z)) + (y - z)  # TwoSum: s + e == x + y exactly
    bits = np.int64(float_bits(s))
    step = np.int64(1) if (e > 0.0) == (s > 0.0) else np.int64(-1)  # a magnitude up, or down
    move = ((e > 0.0) | (e < 0.0)) & ((bits & 1) == 0)
    return rn32(bits_float(u64(bits + step if move else bits)))  # rounded to odd at 53 bits, then to FP32


@njit(cache=True, forceinline=True, error_model="numpy")
def flush(y):
    """An FP32 value with a subnormal flushed to the zero of its sign (NaN and inf pass)."""
    return y if not abs(y) < FP32_MIN_NORMAL else 0.0 * y


@njit(cache=True, forceinline=True, error_model="numpy")
def fp32_value(bits):
    """The float64 of FP32 bits (NaN, infinities and signed zeros included)."""
    cls, sign, e, q, m = decode_one(bits, FP32)
    if cls == NAN:
        return np.nan
    if cls == INF:
        return -np.inf if sign else np.inf
    return decoded_value(sign, q, m)


@njit(cache=True, forceinline=True, error_model="numpy")
def fp32_bits(v):
    """The FP32 bits of an FP32 value held in a float64 (a NaN is 0x7fffffff)."""
    if v != v:
        return 0x7FFFFFFF
    if abs(v) == np.inf:
        return 0xFF800000 if v < 0 else 0x7F800000
    return value_bits(v, 8, 23)


@njit(cache=True, parallel=True, error_model="numpy")
def prepare(x, ftz, values):
    """values (n, K): the float64 of each decoded operand of ``x`` (cls, sign, e, q, m); with
    ``ftz`` a zero or subnormal one is +0."""
    cls, sign, e, q, m = x
    for i in prange(cls.shape[0]):
        for t in range(cls.shape[1]):
            c = cls[i, t]
            if c == NAN:
                values[i, t] = np.nan
            elif c == INF:
                values[i, t] = -np.inf if sign[i, t] else np.inf
            elif ftz and (c == ZERO or msb_index(m[i, t]) < e[i, t] - q[i, t]):
                values[i, t] = 0.0  # a subnormal's significand has fewer bits than the fraction
            else:
                values[i, t] = decoded_value(sign[i, t], q[i, t], m[i, t]) if c == FINITE else (
                    -0.0 if sign[i, t] else 0.0)


@njit(cache=True, forceinline=True, error_model="numpy")
def _fma_chain(acc, av, i, bvt, k):
    """acc[w] = the FP32 FMA chain over t < k: acc = a[i, t] * b[t, w] + acc, rounded once each."""
    for t in range(k):
        x = av[i, t]
        for w in range(LANES):
            acc[w] = rn32_sum(x * bvt[t, w], acc[w])


@njit(cache=True, forceinline=True, error_model="numpy")
def _product(x, y, exact):
    """A product rounded into FP32 and flushed (``exact``: it is an FP32 normal number or zero)."""
    return x * y if exact else flush(rn32(x * y))


@njit(cache=True, forceinline=True, error_model="numpy")
def _pair(x, y, exact):
    """x + y rounded into FP32 and flushed (``exact``: their float64 sum is exact)."""
    return flush(rn32(x + y) if exact else rn32_sum(x, y))


@njit(cache=True, forceinline=True, error_model="numpy")
def _ftz_loop(acc, av, i, bvt, t0, length, quads, exact_products, exact_sums):
    """The products and sums of one FTZ step; every flag is a constant where it is called, so that
    each copy is compiled without the branches."""
    width = 4 if quads else 2
    for t in range(t0, t0 + length, width):
        x0, x1 = av[i, t], av[i, t + 1]
        if quads:
            x2, x3 = av[i, t + 2], av[i, t + 3]
            for w in range(LANES):
                s = _pair(_product(x0, bvt[t, w], exact_products), _product(x1, bvt[t + 1, w], exact_products),
                          exact_sums)
                s2 = _pair(_product(x2, bvt[t + 2, w], exact_products), _product(x3, bvt[t + 3, w], exact_products),
                           exact_sums)
                acc[w] = flush(rn32_sum(acc[w], _pair(s, s2, exact_sums)))
        else:
            for w in range(LANES):
                s = _pair(_product(x0, bvt[t, w], exact_products), _product(x1, bvt[t + 1, w], exact_products),
                          exact_sums)
                acc[w] = flush(rn32_sum(acc[w], s))


@njit(cache=True, forceinline=True, error_model="numpy")
def _ftz_step(acc, av, i, bvt, t0, length, quads, plan):
    """One ADD_FTZ_PAIRS / ADD_FTZ_QUADS step (mma.step_ftz) in the lanes, with ftz_plan's shortcuts."""
    for w in range(LANES):
        acc[w] = acc[w] if acc[w] != 0.0 else 0.0  # a zero c is +0 (a subnormal one is flushed already)
    if quads:
        if plan == 2:
            _ftz_loop(acc, av, i, bvt, t0, length, True, True, True)
        elif plan == 1:
            _ftz_loop(acc, av, i, bvt, t0, length, True, True, False)
        else:
            _ftz_loop(acc, av, i, bvt, t0, length, True, False, False)
    elif plan == 2:
        _ftz_loop(acc, av, i, bvt, t0, length, False, True, True)
    elif plan == 1:
        _ftz_loop(acc, av, i, bvt, t0, length, False, True, False)
    else:
        _ftz_loop(acc, av, i, bvt, t0, length, False, False, False)


@njit(cache=True, forceinline=True, error_model="numpy")
def _exact_step(acc, err, av, i, bvt, t0, length):
    """One ADD_EXACT step in the lanes: acc[w] the sum rounded into FP32 where err[w] == 0 (the
    float64 sum was exact), else meaningless."""
    for w in range(LANES):
        err[w] = 0.0
    for t in range(t0, t0 + length):
        x = av[i, t]
        for w in range(LANES):
            p = x * bvt[t, w]
            s = acc[w] + p
            z = s - acc[w]
            err[w] += abs((acc[w] - (s - z)) + (p - z))  # a NaN (specials) compares unequal to 0 too
            acc[w] = s
    for w in range(LANES):
        s = acc[w]
        acc[w] = rn32(s) if s != 0.0 else 0.0


@njit(cache=True, parallel=True, error_model="numpy")
def lanes_gemm(a, b, c_bits, has_c, out, params, av, bv, plan, probe):
    """mma.mma_gemm for the adders of ADDERS: tiles of ROWS x LANES elements in parallel. av (M, K)
    and bv (N / LANES, K, LANES): the operands' float64 values (prepare), B's in tiles of LANES
    columns padded with zeros; plan: an FTZ adder's shortcuts (ftz_plan). Each tile sets its
    thread's floating-point environment to the default (TwoSum and np.rint need its rounding to
    nearest even) and restores it; False where that could not be had (``probe``:
    _kernels.environment's PROBE): ``out`` is then meaningless."""
    adder, length = params[0], params[1]
    ftz = adder == ADD_FTZ_PAIRS or adder == ADD_FTZ_QUADS
    rows, cols = out.shape
    k = av.shape[1]
    col_tiles = bv.shape[0]
    tiles = ((rows + ROWS - 1) // ROWS) * col_tiles
    good = np.ones(tiles, np.bool_)
    for tile in prange(tiles):
        saved = swap_mxcsr(NEAREST)
        good[tile] = env_ok(probe)
        i0 = (tile // col_tiles) * ROWS
        tj = tile % col_tiles
        j0 = tj * LANES
        bvt = bv[tj]
        nr = min(ROWS, rows - i0)
        nw = min(LANES, cols - j0)
        acc = np.zeros((ROWS, LANES), np.float64)
        prev = np.empty(LANES, np.float64)
        err = np.empty(LANES, np.float64)
        for r in range(nr):
            for w in range(nw):
                v = fp32_value(c_bits[i0 + r, j0 + w]) if has_c else 0.0
                acc[r, w] = flush(v) if ftz else v
        for r in range(nr):
            i = i0 + r
            if adder == ADD_FMA:  # a chain over all of K: the steps only cut it
                _fma_chain(acc[r], av, i, bvt, k)
                continue
            for t0 in range(0, k, length):
                if ftz:
                    _ftz_step(acc[r], av, i, bvt, t0, length, adder == ADD_FTZ_QUADS, plan)
                    continue
                for w in range(LANES):
                    prev[w] = acc[r, w]
                _exact_step(acc[r], err, av, i, bvt, t0, length)
                for w in range(nw):
                    if not err[w] == 0.0:
                        c = decode_one(fp32_bits(prev[w]), FP32)
                        acc[r, w] = fp32_value(step_exact(a, b, i, j0 + w, t0, length, c, params))
        for r in range(nr):
            for w in range(nw):
                out[i0 + r, j0 + w] = fp32_bits(acc[r, w])
        if saved >= 0:
            swap_mxcsr(saved)
    return good.all()


@njit(cache=True, error_model="numpy")
def _normal_span(x):
    """(smallest, largest alignment exponent, largest significand) of a decoded operand's normal
    values ((0, 0, 1) if none)."""
    cls, _, e, q, m = x
    lo, hi, top = 1 << 30, -(1 << 30), 1
    for i in range(cls.shape[0]):
        for t in range(cls.shape[1]):
            if cls[i, t] == FINITE and msb_index(m[i, t]) == e[i, t] - q[i, t]:
                lo, hi, top = min(lo, e[i, t]), max(hi, e[i, t]), max(top, m[i, t])
    return (lo, hi, top) if hi >= lo else (0, 0, 1)


def ftz_plan(a, b) -> int:
    """What an FTZ adder may skip for these operands (its others read as +0): 1 if every product of
    two normal operands is an FP32 normal number (at most 24 significand bits, between 2**-126 and
    2**128): no rounding or flushing of the products; 2 if, besides, the products' sums within a
    quad are exact in float64: every product, and so every such sum and its rounding into FP32,
    is a multiple of 2**(lowest exponents - fraction bits), each sum below 4 * 2**(highest
    exponents + 2); else 0."""
    (lo_a, hi_a, top_a), (lo_b, hi_b, top_b) = _normal_span(a), _normal_span(b)
    bits = int(top_a).bit_length() + int(top_b).bit_length()
    if bits > 24 or lo_a + lo_b < -126 or hi_a + hi_b + 2 > 128:
        return 0
    quantum = lo_a + lo_b - (bits - 2)
    return 2 if (hi_a + hi_b + 4) - quantum <= 53 else 1


def mma_gemm(a, b, c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params) -> None:
    """mma.mma_gemm (same arguments, same bits) for the adders of ADDERS, in lanes (FP32 C and D)."""
    # (An FMA chain's model leaves its output field at the default: every FMA rounds to nearest even.)
    if params[0] not in ADDERS or tuple(c_fmt[:4]) != FP32[:4] or tuple(d_fmt[:4]) != FP32[:4] or \
            params[4] != OUT_RNE_FP32 and params[0] != ADD_FMA:
        scalar_gemm(a, b, c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params)
        return
    ftz = params[0] in (ADD_FTZ_PAIRS, ADD_FTZ_QUADS)
    rows, k = a[0].shape
    cols = b[0].shape[0]
    padded = -(-cols // LANES) * LANES
    av = np.empty((rows, k))
    prepare(a, ftz, av)
    bv = np.zeros((padded, k))
    prepare(b, ftz, bv[:cols])
    bv = np.ascontiguousarray(bv.reshape(-1, LANES, k).transpose(0, 2, 1))
    if not lanes_gemm(a, b, c_bits, has_c, out, params, av, bv, ftz_plan(a, b) if ftz else 0, PROBE):
        scalar_gemm(a, b, c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params)  # not the default environment
