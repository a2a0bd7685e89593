"""The matrix-unit adders that align and truncate (``ADD_TRUNCATED``, ``ADD_GROUPS``: NVIDIA;
``ADD_C_APART``, ``ADD_C_APART_SPLIT``: AMD CDNA3; softfloat16._kernels.mma) in SIMD lanes of
float64: LANES output elements of one row take each step together in straight-line loops, which
LLVM vectorises. The bits are the scalar kernel's (mma.mma_gemm), element for element.
softfloat16._kernels.mma_lanes_operands reads the operands into lanes and calls :func:`lanes_gemm`.

An operand is held as its value (float64, exact) and its alignment exponent ``e`` (int16: twice the
lanes of int32 per vector in the exponent maxima; lanes_fit keeps every ``e`` within E_BOUND). A block
scale of an ``ADD_TRUNCATED`` preset is folded into its operand: the value times the scale's, ``e``
plus the scale's (a product's alignment exponent is the sum of its four). :func:`lanes_fit` checks
that every product (one float64 multiplication) is exact and a normal number, between 2**-900 and
2**900, so that each multiplication by a power of two is exact too, or below 2**-1022 gives a
value below 1 where the exact one is below 1 too: np.trunc of a term is then always the
adder's truncation toward zero. A step of one lane:

- ``emax``: the largest of ``e_a + e_b`` over the products, of the accumulator's ``e`` and, when a
  product or the accumulator is zero, of ``e_zero`` (a zero operand has ``e`` = NONE, far below
  every real exponent, so its products take no part; per-step flags say where a zero is);
- every term times 2**(F - emax), truncated: an integer below 2**(F + 2); their sum (at most
  ``length + 1`` terms, whose bound lanes_fit checks against 2**53) is exact in float64;
- the sum times 2**(emax - F), exact, is rounded into D: to nearest even (FP16, FP32) by scaling it
  to an integer at its quantum, np.rint, and scaling back; toward zero (FP32, E8M13) by cutting
  its float64 fraction to D's bits (the same binade), below D's minimum normal as np.trunc at the
  fixed subnormal quantum; a result of 2**128 (2**16 for FP16) or more is an infinity.

The AMD adders (:func:`_c_apart_lanes`) take the same exact steps: the products truncated below
their own maximum (zeros take no part), the sums and the accumulator rounded down (np.floor) to
their quanta, the sum rounded down to ``frac_bits2`` bits and to nearest even into FP32, keeping
the sign of a zero. A lane whose products may reach 2**128 (an infinity there) takes the scalar step.

A NaN or infinity anywhere in a step (operands are flagged per row and step, and per column and
step), and every later step of a lane whose accumulator is no longer finite, is computed by the
scalar step (mma.step_truncated, mma.step_groups, mma.step_c_apart) from the accumulator's bits;
the lanes compute meaningless values there, which are replaced. The bits depend on no thread
count: each element is computed alone.
"""
import numpy as np
from numba import njit, prange

from .core import FINITE, INF, ZERO
from .environment import NEAREST, env_ok, swap_mxcsr
from .fast import bits_float, float_bits
from .mma import ADD_C_APART, ADD_C_APART_SPLIT, ADD_GROUPS, ADD_TRUNCATED, FP32_EMIN, OUT_RNE_FP16, OUT_RNE_FP32
from .mma import OUT_RZ_E8M13, decode_one, special_bits, step_c_apart, step_groups
from .mma import step_truncated

# Output elements of a row side by side (the columns of a tile). Measured on AVX-512 (Zen 4), h100
# FP16 256^3 one thread, the lanes and their operands: 128 lanes 3.6 ms, 64 lanes 4.0 ms.
LANES = 128
ROWS = 8  # rows of a tile: they share each step's lanes of B while those are in the L1 cache
NONE = -(1 << 14)  # the exponent of a zero (or NaN, inf) operand: sums with it stay below NONE // 2
E_BOUND = 4000  # |e| of every operand (scales folded in) in lanes: sums of two fit int16, NONE's stay apart
NO_PART = -400  # the AMD adders' exponent of no product: below every product's and accumulator's
LANE_ADDERS = (ADD_TRUNCATED, ADD_GROUPS, ADD_C_APART, ADD_C_APART_SPLIT)
KEEP = 2  # a lane's step that leaves its NaN or infinite accumulator as it is (1: the scalar step's bits)
u64 = np.uint64


@njit(cache=True, forceinline=True, error_model="numpy")
def pow2(n):
    """2.0**n for -1022 <= n <= 1023 (built from its exponent field: exact, vectorisable)."""
    return bits_float(u64(np.int64(n + 1023) << 52))


@njit(cache=True, forceinline=True, error_model="numpy")
def exponent(v):
    """The unbiased exponent of a normal float64 (-1023 for zero)."""
    return np.int64(u64(float_bits(v) >> u64(52)) & u64(0x7FF)) - 1023


@njit(cache=True, forceinline=True, error_model="numpy")
def rounded(v, emin, fbits, rne):
    """An exact float64 v rounded into a format of ``fbits`` fraction bits and minimum exponent
    ``emin`` (subnormals kept), to nearest even or toward zero: v times 2**-u, with 2**u the
    format's quantum at v's exponent, np.rint or np.trunc, times 2**u (no overflow check)."""
    u = max(exponent(v), emin) - fbits
    x = v * pow2(-u)
    return (np.rint(x) if rne else np.trunc(x)) * pow2(u)


@njit(cache=True, forceinline=True, error_model="numpy")
def value_bits(v, ebits, fbits):
    """The bits of a finite float64 v that the IEEE format (ebits, fbits) represents exactly."""
    encoding = float_bits(v)
    sign = np.int64(encoding >> u64(63))
    if v == 0.0:
        return sign << (ebits + fbits)
    e = exponent(v)
    m = np.int64(encoding & u64((1 << 52) - 1)) | (1 << 52)
    emin = 2 - (1 << (ebits - 1))
    if e >= emin:
        bits = ((e - emin + 1) << fbits) | ((m >> (52 - fbits)) & ((1 << fbits) - 1))
    else:
        bits = m >> (52 - fbits + emin - e)
    return (sign << (ebits + fbits)) | bits


@njit(cache=True, forceinline=True, error_model="numpy")
def decoded_value(sign, q, m):
    """(-1)**sign * m * 2**q as a float64 (exact: m < 2**53, q within float64's range)."""
    v = np.float64(m) * pow2(q)
    return -v if sign else v


@njit(cache=True, forceinline=True, error_model="numpy")
def _scalar_step(a, b, sa, sb, params, i, j, step, c_bits, has_c, c_fmt, d_fmt, value, dead, dead_bits):
    """The scalar kernel's step for one element, from the accumulator it would have had."""
    length = params[1]
    if step == 0:
        c = decode_one(c_bits[i, j] if has_c else 0, c_fmt)
    else:
        c = decode_one(dead_bits if dead else value_bits(value, d_fmt[0], d_fmt[1]), d_fmt)
    if params[0] == ADD_TRUNCATED:
        return step_truncated(a, b, i, j, step * length, length, c, sa, sb, params)
    if params[0] == ADD_GROUPS:
        return step_groups(a, b, i, j, step * length, length, c, sa, sb, params)
    return step_c_apart(a, b, i, j, step * length, length, c, params)


@njit(cache=True, forceinline=True, error_model="numpy")
def _set_state(bits, d_fmt, e_zero, vc, ce, dead, dead_bits, r, w):
    """A lane's accumulator from D bits: its value and exponent, or (not finite) the bits alone.
    Returns 1 if the lane is now dead (not finite) and was not, -1 for the reverse, else 0."""
    cls, sign, e, q, m = decode_one(bits, d_fmt)
    was = dead[r, w]
    if cls == FINITE or cls == ZERO:
        vc[r, w] = decoded_value(sign, q, m) if cls == FINITE else (-0.0 if sign else 0.0)
        ce[r, w] = e if cls == FINITE else e_zero
        dead[r, w] = 0
        return -int(was)
    vc[r, w] = 0.0
    ce[r, w] = e_zero
    dead[r, w] = 1
    dead_bits[r, w] = bits
    return 1 - int(was)


@njit(cache=True, forceinline=True, error_model="numpy")
def _exponent_max(em, ae, i, bet, t0, t1):
    """em[w] = max(em[w], ae[i, t] + bet[t, w]) over t0 <= t < t1, four t at a time."""
    end = t0 + (t1 - t0) // 4 * 4
    for t in range(t0, end, 4):
        x0, x1, x2, x3 = ae[i, t], ae[i, t + 1], ae[i, t + 2], ae[i, t + 3]
        for w in range(LANES):
            m01 = max(np.int16(x0 + bet[t, w]), np.int16(x1 + bet[t + 1, w]))
            m23 = max(np.int16(x2 + bet[t + 2, w]), np.int16(x3 + bet[t + 3, w]))
            em[w] = max(em[w], max(m01, m23))
    for t in range(end, t1):
        x = ae[i, t]
        for w in range(LANES):
            em[w] = max(em[w], np.int16(x + bet[t, w]))


@njit(cache=True, forceinline=True, error_model="numpy")
def _term_sum(acc, inv, av, i, bvt, t0, t1):
    """acc[w] += trunc(av[i, t] * bvt[t, w] * inv[w]) over t0 <= t < t1, eight t at a time (integer
    terms whose magnitudes add up below 2**53, lanes_fit: every partial sum is exact, in any order).
    Eight t per pass load and store acc once for 8 x LANES terms: measured on AVX-512 (Zen 4), the
    term sums of a 256^3 GEMM take 1.5 ms in passes of eight t, 2.0 ms in passes of four, 2.1 ms in
    tiles of two rows x four t sharing each vector of B (the accumulators live in memory either way)."""
    end = t0 + (t1 - t0) // 8 * 8
    for t in range(t0, end, 8):
        y0, y1, y2, y3 = av[i, t], av[i, t + 1], av[i, t + 2], av[i, t + 3]
        y4, y5, y6, y7 = av[i, t + 4], av[i, t + 5], av[i, t + 6], av[i, t + 7]
        for w in range(LANES):
            s01 = np.trunc(y0 * bvt[t, w] * inv[w]) + np.trunc(y1 * bvt[t + 1, w] * inv[w])
            s23 = np.trunc(y2 * bvt[t + 2, w] * inv[w]) + np.trunc(y3 * bvt[t + 3, w] * inv[w])
            s45 = np.trunc(y4 * bvt[t + 4, w] * inv[w]) + np.trunc(y5 * bvt[t + 5, w] * inv[w])
            s67 = np.trunc(y6 * bvt[t + 6, w] * inv[w]) + np.trunc(y7 * bvt[t + 7, w] * inv[w])
            acc[w] += (s01 + s23) + (s45 + s67)
    for t in range(end, t1):
        y = av[i, t]
        for w in range(LANES):
            acc[w] += np.trunc(y * bvt[t, w] * inv[w])


@njit(cache=True, forceinline=True, error_model="numpy")
def _term_sum32(lo, hi, inv, av, i, bvt, t0, t1):
    """:func:`_term_sum` in binary32 lanes (``narrow``, :func:`narrow_fit`): each term's product and
    scaling are exact binary32 values and its conversion to int32 truncates toward zero, 16 lanes per
    AVX-512 vector where binary64 has 8. Of each eight t, the first four are added into ``lo``, the
    others into ``hi`` (int32): narrow_fit bounds either sum below 2**31. Measured on AVX-512 (Zen 4):
    0.043 ns per term and lane, against 0.080 in binary64."""
    end = t0 + (t1 - t0) // 8 * 8
    for t in range(t0, end, 8):
        y0, y1, y2, y3 = av[i, t], av[i, t + 1], av[i, t + 2], av[i, t + 3]
        y4, y5, y6, y7 = av[i, t + 4], av[i, t + 5], av[i, t + 6], av[i, t + 7]
        for w in range(LANES):
            s01 = np.int32(y0 * bvt[t, w] * inv[w]) + np.int32(y1 * bvt[t + 1, w] * inv[w])
            s23 = np.int32(y2 * bvt[t + 2, w] * inv[w]) + np.int32(y3 * bvt[t + 3, w] * inv[w])
            s45 = np.int32(y4 * bvt[t + 4, w] * inv[w]) + np.int32(y5 * bvt[t + 5, w] * inv[w])
            s67 = np.int32(y6 * bvt[t + 6, w] * inv[w]) + np.int32(y7 * bvt[t + 7, w] * inv[w])
            lo[w] += s01 + s23
            hi[w] += s45 + s67
    for t in range(end, t1):
        y = av[i, t]
        for w in range(LANES):
            hi[w] += np.int32(y * bvt[t, w] * inv[w])


def narrow_fit(span_a, span_b, params, scaled) -> bool:
    """Whether an ``ADD_TRUNCATED`` GEMM of operands of these spans ((largest e, smallest q,
    largest m): mma_lanes_operands._span) may take its terms in binary32 lanes (:func:`_term_sum32`):
    unscaled; every operand a binary32 normal number (so its float64 value converts exactly, in any
    environment); every product exact and normal in binary32, and at least 2**(F - 127) where it is
    not zero (so the binary32 scaling 2**(F - emax) of a step with a nonzero product is a normal
    binary32 value; in other steps it is capped at 2**127 and meets only zeros); and each of a
    step's two int32 sums below 2**31: each has at most ``n`` terms (four of each eight, and the
    rest of a step into ``hi``), each below 2**(F + 2), and ``lo`` the accumulator's, below
    2**(F + 1)."""
    adder, length, frac_bits = params[0], params[1], params[2]
    (ea, qa, ma), (eb, qb, mb) = span_a, span_b
    n = 4 * (length // 8) + length % 8
    return (adder == ADD_TRUNCATED and not scaled and min(qa, qb) >= -126 and max(ea, eb) <= 127
            and ma * mb < 1 << 24 and qa + qb >= max(-126, frac_bits - 127) and ea + eb + 2 <= 127
            and (2 * n + 1) << (frac_bits + 1) < 1 << 31)


@njit(cache=True, forceinline=True, error_model="numpy")
def _product_sum(total, av, i, bvt, t0, t1):
    """total[w] = the sum of av[i, t] * bvt[t, w] over t0 <= t < t1 (exact: lanes_fit)."""
    for w in range(LANES):
        total[w] = 0.0
    end = t0 + (t1 - t0) // 4 * 4
    for t in range(t0, end, 4):
        y0, y1, y2, y3 = av[i, t], av[i, t + 1], av[i, t + 2], av[i, t + 3]
        for w in range(LANES):
            total[w] += (y0 * bvt[t, w] + y1 * bvt[t + 1, w]) + (y2 * bvt[t + 2, w] + y3 * bvt[t + 3, w])
    for t in range(end, t1):
        y = av[i, t]
        for w in range(LANES):
            total[w] += y * bvt[t, w]


@njit(cache=True, forceinline=True, error_model="numpy")
def _exponent_max_odd_even(em, gm, ae, i, bet, t0, t1):
    """em / gm: the largest ae[i, t] + bet[t, w] over the even / odd t - t0 (from NONE)."""
    for w in range(LANES):
        em[w] = NONE
        gm[w] = NONE
    for t in range(t0, t1, 2):
        x0, x1 = ae[i, t], ae[i, t + 1]
        for w in range(LANES):
            em[w] = max(em[w], np.int16(x0 + bet[t, w]))
            gm[w] = max(gm[w], np.int16(x1 + bet[t + 1, w]))


@njit(cache=True, forceinline=True, error_model="numpy")
def _term_sum_odd_even(acc, acc2, inv, inv2, av, i, bvt, t0, t1):
    """_term_sum of the even t - t0 into acc (scale inv), of the odd ones into acc2 (scale inv2)."""
    for w in range(LANES):
        acc[w] = 0.0
        acc2[w] = 0.0
    for t in range(t0, t1, 2):
        y0, y1 = av[i, t], av[i, t + 1]
        for w in range(LANES):
            acc[w] += np.trunc(y0 * bvt[t, w] * inv[w])
            acc2[w] += np.trunc(y1 * bvt[t + 1, w] * inv2[w])


@njit(cache=True, forceinline=True, error_model="numpy")
def _c_apart_lanes(params, vc, ce, r, em, gm, acc, acc2, inv, inv2, av, i, bvt, t0):
    """One ADD_C_APART(_SPLIT) step in the lanes (mma.step_c_apart), after the products' exponent
    maxima (em; the split adder's odd products: gm); returns the results, FP32 values (-0 kept)."""
    adder, length, frac_bits, e_zero, out_kind, group, block, scaled, frac_bits2 = params
    split = adder == ADD_C_APART_SPLIT
    for w in range(LANES):
        # No product (all zero): NO_PART, below every accumulator exponent, with sums of 0.
        inv[w] = pow2(frac_bits - max(em[w], NO_PART))
        inv2[w] = pow2(frac_bits - max(gm[w], NO_PART))
    if split:
        _term_sum_odd_even(acc, acc2, inv, inv2, av, i, bvt, t0, t0 + length)
    else:
        for w in range(LANES):
            acc[w] = 0.0
            acc2[w] = 0.0
        _term_sum(acc, inv, av, i, bvt, t0, t0 + length)
    for w in range(LANES):
        e_even = max(em[w], NO_PART)
        e_odd = max(gm[w], NO_PART) if split else NO_PART
        e_dot = max(e_even, e_odd)
        s_dot = np.floor(acc[w] * pow2(e_even - e_dot)) + np.floor(acc2[w] * pow2(e_odd - e_dot))
        emax = max(e_dot, np.int64(ce[r, w]))
        quantum = emax - frac_bits2 - 1
        total = np.floor(s_dot * pow2(e_dot - frac_bits - quantum))
        c_term = np.floor(vc[r, w] * pow2(frac_bits - emax)) * pow2(frac_bits2 + 1 - frac_bits)
        total += 0.0 if split and ce[r, w] < emax - frac_bits - 1 else c_term
        # Rounded down to frac_bits2 fraction bits (at least FP32's minimum exponent), then RNE.
        v = total * pow2(quantum)
        top = max(exponent(v), FP32_EMIN)
        v = np.floor(v * pow2(frac_bits2 - top)) * pow2(top - frac_bits2)
        acc[w] = 0.0 if total == 0.0 else rounded(v, FP32_EMIN, 23, True)


@njit(cache=True, forceinline=True, error_model="numpy")
def _accumulated(acc, vc, ce, r, emin, limit, zero_e):
    """The lanes' new accumulators from their results acc (exact values of D, the sign of a zero
    kept): vc, ce of row r; returns how many reach ``limit`` (an infinity: those keep their value
    in vc until the caller makes them infinite accumulators)."""
    overflows = 0
    for w in range(LANES):
        y = acc[w]
        big = abs(y) >= limit
        overflows += np.int64(big)
        vc[r, w] = y
        ce[r, w] = zero_e if (big or y == 0.0) else np.int16(max(exponent(y), emin))
    return overflows


@njit(cache=True, forceinline=True, error_model="numpy")
def _rounded_into_d(acc, em, vc, ce, r, frac_bits, emin, fb, limit, zero_e):
    """The sum acc (an integer at 2**(em - frac_bits)) rounded to nearest even into D (``fb`` fraction
    bits, minimum exponent ``emin``), +0 for 0, then as :func:`_accumulated`, in one pass."""
    overflows = 0
    for w in range(LANES):
        y = rounded(acc[w] * pow2(em[w] - frac_bits), emin, fb, True)
        big = abs(y) >= limit
        overflows += np.int64(big)
        vc[r, w] = 0.0 if y == 0.0 else y
        ce[r, w] = zero_e if (big or y == 0.0) else np.int16(max(exponent(y), emin))
    return overflows


@njit(cache=True, forceinline=True, error_model="numpy")
def _truncated_into_d(acc, em, vc, ce, r, frac_bits, emin, fb, limit, zero_e):
    """:func:`_rounded_into_d` toward zero, D's exponent range FP32's (``limit`` 2**128): at or
    above 2**emin the value with its float64 fraction cut to ``fb`` bits (the same binade: its
    exponent is D's); the rare lanes below, in D's subnormals, take :func:`rounded`'s steps at the
    fixed quantum 2**(emin - fb) in a second pass. It runs once per step and lane, so the first
    pass is integer work on the exponent field: measured on AVX-512 (Zen 4), h100 FP16 256^3, the
    whole product 0.2 ms faster than rounding every lane by scaling."""
    keep = ~u64((1 << (52 - fb)) - 1)
    field_min = np.int64(emin + 1022)  # a nonzero v below 2**emin: field - 1 < field_min, unsigned
    big = tiny = np.int64(0)
    for w in range(LANES):
        bits = float_bits(acc[w] * pow2(em[w] - frac_bits))
        field = np.int64(bits >> u64(52)) & 0x7FF
        zero = field == 0  # the sum is 0 (exact: every term is a multiple of the quantum)
        vc[r, w] = 0.0 if zero else bits_float(bits & keep)
        ce[r, w] = zero_e if zero else np.int16(field - 1023)
        tiny |= np.int64(u64(field - 1) < u64(field_min))
        big |= np.int64(field >= 1023 + 128)
    if tiny:
        up, down = pow2(fb - emin), pow2(emin - fb)
        for w in range(LANES):
            v = acc[w] * pow2(em[w] - frac_bits)
            if v != 0.0 and exponent(v) < emin:
                y = np.trunc(v * up) * down
                vc[r, w] = 0.0 if y == 0.0 else y
                ce[r, w] = zero_e if y == 0.0 else np.int16(emin)
    return big


@njit(cache=True, parallel=True, error_model="numpy")
def lanes_gemm(a, b, c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params, lanes_a, lanes_b, scales_a, scales_b, narrow,
               probe):
    """mma.mma_gemm for the adders of LANE_ADDERS: tiles of ROWS x LANES elements in parallel.
    Each tile sets its thread's floating-point environment to the default (np.rint rounds to
    nearest even in it) and restores it; False where that environment could not be had
    (_kernels.environment, ``probe`` its PROBE): ``out`` is then meaningless. ``narrow`` (where
    :func:`narrow_fit`): the terms in binary32 lanes.

    lanes_a = (values, values32, exps, zero, special) of A, (M, K) and (M, steps): its values in
    binary64 or (``narrow``) binary32, the other array a (1, 1) stand-in (one compiled kernel for
    both); lanes_b the same of B in
    tiles of LANES columns (padded with zeros), (N / LANES, K, LANES) and (N / LANES, steps, LANES),
    and each tile's special flags (N / LANES, steps); scales_a / scales_b (values, exps, zero) of a
    group adder's scales, (M, K // block) and (N / LANES, K // block, LANES). Every innermost index
    is a lane number from a range: no wraparound, contiguous, so the loops vectorise."""
    adder, length, frac_bits, e_zero, out_kind, group, block, scaled, frac_bits2 = params
    av, av32, ae, az, a_special = lanes_a
    bv, bv32, be, bz, b_special, tile_special = lanes_b
    sav, sae, saz = scales_a
    sbv, sbe, sbz = scales_b
    rows, cols = out.shape
    steps = az.shape[1]
    groups = length // group
    amd = adder == ADD_C_APART or adder == ADD_C_APART_SPLIT
    rne = out_kind == OUT_RNE_FP16 or out_kind == OUT_RNE_FP32
    emin = -14 if out_kind == OUT_RNE_FP16 else FP32_EMIN
    fb = 10 if out_kind == OUT_RNE_FP16 else (13 if out_kind == OUT_RZ_E8M13 else 23)
    limit = 65536.0 if out_kind == OUT_RNE_FP16 else 2.0 ** 128
    zero_e = emin if amd else e_zero  # the exponent of a zero accumulator (the AMD adders: FP32's minimum)
    keeps = not amd  # the NVIDIA adders: a NaN accumulator gives NaN, an infinite one itself unless a product
    # is a NaN or infinity (the AMD split adder can drop an infinite accumulator)
    row_tiles = (rows + ROWS - 1) // ROWS
    col_tiles = be.shape[0]
    good = np.ones(row_tiles * col_tiles, np.bool_)
    for tile in prange(row_tiles * col_tiles):
        saved = swap_mxcsr(NEAREST)
        good[tile] = env_ok(probe)
        i0 = (tile // col_tiles) * ROWS
        tj = tile % col_tiles
        j0 = tj * LANES
        bvt, bvt32 = bv[0 if narrow else tj], bv32[tj if narrow else 0]  # (the stand-in: never read)
        bet, bzt, bst = be[tj], bz[tj], b_special[tj]
        sbvt, sbet, sbzt = sbv[tj], sbe[tj], sbz[tj]
        nr = min(ROWS, rows - i0)
        nw = min(LANES, cols - j0)
        vc = np.zeros((ROWS, LANES), np.float64)
        ce = np.full((ROWS, LANES), zero_e, np.int16)
        dead = np.zeros((ROWS, LANES), np.int8)
        dead_bits = np.zeros((ROWS, LANES), np.int64)
        n_dead = np.zeros(ROWS, np.int64)
        em = np.empty(LANES, np.int16)  # int16: twice the lanes of int32 per vector
        gm = np.empty(LANES, np.int16)
        inv = np.empty(LANES, np.float64)
        inv32 = np.empty(LANES, np.float32)
        lo = np.empty(LANES, np.int32)
        hi = np.empty(LANES, np.int32)
        inv2 = np.empty(LANES, np.float64)
        acc = np.empty(LANES, np.float64)
        acc2 = np.empty(LANES, np.float64)
        sums = np.empty((max(groups, 1), LANES), np.float64)
        factors = np.empty((max(groups, 1), LANES), np.float64)
        redo = np.zeros(LANES, np.int8)
        redo_bits = np.zeros(LANES, np.int64)
        for r in range(nr):
            for w in range(nw):
                n_dead[r] += _set_state(c_bits[i0 + r, j0 + w] if has_c else 0, c_fmt, zero_e, vc, ce, dead,
                                        dead_bits, r, w)
        for step in range(steps):
            t0 = step * length
            for r in range(nr):
                i = i0 + r
                risky = 0
                if amd:
                    if adder == ADD_C_APART_SPLIT:
                        _exponent_max_odd_even(em, gm, ae, i, bet, t0, t0 + length)
                    else:
                        for w in range(LANES):
                            em[w] = NONE
                            gm[w] = NONE
                        _exponent_max(em, ae, i, bet, t0, t0 + length)
                        for w in range(LANES):
                            risky += em[w] >= 127  # a product may reach 2**128: an infinity
                # Lanes that take the scalar step: computed first, from the accumulator before the step.
                scalar = a_special[i, step] or tile_special[tj, step] or n_dead[r] > 0 or risky > 0
                if scalar:
                    for w in range(nw):
                        special = a_special[i, step] or bst[step, w]
                        redo[w] = special or dead[r, w] or (risky > 0 and em[w] >= 127)
                        if redo[w] and keeps and step > 0 and not special:
                            redo[w] = KEEP  # a NaN or infinity (of D) that finite products keep
                        elif redo[w]:
                            redo_bits[w] = _scalar_step(a, b, sa, sb, params, i, j0 + w, step, c_bits, has_c, c_fmt,
                                                        d_fmt, vc[r, w], dead[r, w], dead_bits[r, w])
                if amd:
                    _c_apart_lanes(params, vc, ce, r, em, gm, acc, acc2, inv, inv2, av, i, bvt, t0)
                elif adder == ADD_TRUNCATED:
                    zero_a = az[i, step]
                    for w in range(LANES):
                        e0 = ce[r, w]
                        em[w] = max(e0, e_zero) if (zero_a or bzt[step, w]) else e0
                    _exponent_max(em, ae, i, bet, t0, t0 + length)
                    if narrow:
                        for w in range(LANES):
                            inv32[w] = np.float32(pow2(min(frac_bits - em[w], 127)))  # exact
                            lo[w] = np.int32(vc[r, w] * pow2(frac_bits - em[w]))  # toward zero, below 2**(F + 1)
                            hi[w] = 0
                        _term_sum32(lo, hi, inv32, av32, i, bvt32, t0, t0 + length)
                        for w in range(LANES):
                            acc[w] = np.float64(lo[w]) + np.float64(hi[w])
                    else:
                        for w in range(LANES):
                            inv[w] = pow2(frac_bits - em[w])
                            acc[w] = np.trunc(vc[r, w] * inv[w])
                        _term_sum(acc, inv, av, i, bvt, t0, t0 + length)
                else:
                    for w in range(LANES):
                        em[w] = ce[r, w]
                    for g in range(groups):
                        tg = t0 + g * group
                        s = tg // block
                        for w in range(LANES):
                            gm[w] = NONE
                        _exponent_max(gm, ae, i, bet, tg, tg + group)
                        _product_sum(sums[g], av, i, bvt, tg, tg + group)
                        zero_s, e_s, v_s = saz[i, s], sae[i, s], sav[i, s]
                        for w in range(LANES):
                            # A group of zeros, or a zero scale, is a zero term at e_zero.
                            live = gm[w] > NONE // 2 and not zero_s and not sbzt[s, w]
                            em[w] = max(em[w], np.int32(e_s + sbet[s, w]) if live else np.int32(e_zero))
                            factors[g, w] = v_s * sbvt[s, w] if live else 0.0
                    for w in range(LANES):
                        inv[w] = pow2(frac_bits - em[w])
                        acc[w] = np.trunc(vc[r, w] * inv[w])
                    for g in range(groups):
                        for w in range(LANES):
                            acc[w] += np.trunc(sums[g, w] * factors[g, w] * inv[w])
                if amd:
                    overflows = _accumulated(acc, vc, ce, r, emin, limit, zero_e)
                elif rne:
                    overflows = _rounded_into_d(acc, em, vc, ce, r, frac_bits, emin, fb, limit, zero_e)
                else:
                    overflows = _truncated_into_d(acc, em, vc, ce, r, frac_bits, emin, fb, limit, zero_e)
                if overflows:  # an infinity (a lane that takes the scalar step gets its bits below)
                    for w in range(nw):
                        if abs(vc[r, w]) >= limit and not (scalar and redo[w]):
                            n_dead[r] += _set_state(special_bits(INF, int(vc[r, w] < 0.0), out_kind), d_fmt, zero_e,
                                                    vc, ce, dead, dead_bits, r, w)
                if scalar:
                    for w in range(nw):
                        if redo[w] == KEEP:  # still dead: only the lanes' meaningless values are cleared
                            vc[r, w] = 0.0
                            ce[r, w] = zero_e
                        elif redo[w]:
                            n_dead[r] += _set_state(redo_bits[w], d_fmt, zero_e, vc, ce, dead, dead_bits, r, w)
        for r in range(nr):
            for w in range(nw):
                out[i0 + r, j0 + w] = dead_bits[r, w] if dead[r, w] else value_bits(vc[r, w], d_fmt[0], d_fmt[1])
        if saved >= 0:
            swap_mxcsr(saved)
    return good.all()
