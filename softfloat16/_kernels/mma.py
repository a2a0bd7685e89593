"""Matrix-unit instructions (tensor core, MFMA) as exact integer models, one output element at a time.

Every operand is first decoded (:func:`decode`) to ``(cls, sign, e, q, m)``: its value is
``m * 2**q`` and ``e`` is the exponent the hardware aligns on, the exponent of the leading bit for a
normal number and the format's minimum exponent for a subnormal one (``q = e - fraction bits``).

One *step* is one fused dot-product-add over ``L`` products and the accumulator ``c`` (softfloat16.mma
documents the models and which preset uses which):

- ``ADD_TRUNCATED`` (NVIDIA): every term, ``c`` included, is truncated toward zero to a multiple of
  ``2**(emax - F)``, where ``emax`` is the largest of the terms' alignment exponents (``e_a + e_b`` for
  a product, plus the scales' for block-scaled kinds; a zero term counts at the fixed ``e_zero``), and
  the terms are summed exactly; the sum is rounded once into the output (round toward zero into FP32
  or into FP32 with 13 fraction bits, or to nearest even into FP16), overflow gives inf.
- ``ADD_GROUPS`` (NVIDIA mxf4 / mxf4nvf4): groups of ``G`` products are summed exactly first; each
  group sum times its two scales is one term aligned at the scales' exponent sum (``e_zero`` when
  every product of the group is zero or a scale is zero), then as ``ADD_TRUNCATED``.
- ``ADD_C_APART`` / ``ADD_C_APART_SPLIT`` (AMD CDNA3): the products (or the even- and odd-indexed
  halves, each aligned on its own, then added rounding down) are truncated to ``F`` bits; the sum and
  ``c`` are then aligned on the larger, rounded down to ``F2 + 1`` and ``F`` bits, added, rounded
  down to ``F2`` fraction bits and rounded to nearest even into FP32.
- ``ADD_EXACT`` (AMD CDNA1): the exact sum of the products and ``c``, rounded once to nearest even.
- ``ADD_FTZ_PAIRS`` / ``ADD_FTZ_QUADS`` (AMD CDNA2): products rounded into FP32, then added in pairs
  (and pairs of pairs) into ``c`` with FP32 additions; subnormal inputs and results are flushed.
- ``ADD_FMA``: a chain of FP32 fused multiply-adds (the FP64 instructions' binary64 chain:
  softfloat16._kernels.mma_fma64).

A NaN result is ``nan_bits`` (0x7fffffff for FP32, 0x7fff for FP16); an exact zero is +0 except
where the model keeps the sign of zeros (the AMD adders).
"""
import numpy as np
from numba import njit, prange

from .arith import add_finite
from .core import FINITE, IEEE, INF, NAN, RNE, RTZ, ZERO, bias_of, exact_zero_sign, msb_index, round_pack, unpack

ADD_TRUNCATED, ADD_GROUPS, ADD_C_APART, ADD_C_APART_SPLIT, ADD_EXACT, ADD_FTZ_PAIRS, ADD_FTZ_QUADS, ADD_FMA = range(8)
# What the adder's sum becomes (the output's format and rounding).
OUT_RZ_FP32, OUT_RZ_E8M13, OUT_RNE_FP16, OUT_RNE_FP32, OUT_RNE_FP64 = range(5)  # FP64: _kernels.mma_fma64
NO_EXPONENT = -(1 << 20)  # a zero term that takes no part in the alignment maximum
FP32_FRACTION_BITS = 23
FP32_EMIN = -126


@njit(cache=True, forceinline=True, error_model="numpy")
def decode_one(bits, fmt):
    """(cls, sign, e, q, m) of one pattern of the format ``fmt = (ebits, fbits, encoding, shift, mask)``:
    the pattern is ``(bits & mask) >> shift`` (TF32 in FP32 registers, UE4M3 in a byte)."""
    ebits, fbits, encoding, shift, mask = fmt
    cls, sign, exp, sig = unpack((int(bits) & mask) >> shift, ebits, fbits, encoding, False)
    if cls == FINITE:
        return cls, sign, exp + fbits, exp, sig
    return cls, sign, 1 - bias_of(ebits, encoding), 0, 0  # a zero sits at the minimum exponent


@njit(cache=True, error_model="numpy")
def decode(bits, fmt, cls, sign, e, q, m):
    """decode_one over a flat array into five arrays (one thread: a pass over the operands is cheap
    next to the GEMM, and starting threads costs more on small ones)."""
    for t in range(bits.shape[0]):
        cls[t], sign[t], e[t], q[t], m[t] = decode_one(bits[t], fmt)


@njit(cache=True, forceinline=True, error_model="numpy")
def _aligned(m, q, quantum):
    """|m * 2**q| / 2**quantum truncated to an integer (m >= 0)."""
    shift = q - quantum
    if shift >= 0:
        return m << shift
    if shift <= -63:
        return 0
    return m >> (-shift)


@njit(cache=True, forceinline=True, error_model="numpy")
def _floor_shift(x, shift):
    """floor(x * 2**shift) for a signed integer x."""
    if shift >= 0:
        return x << shift
    if shift <= -63:
        return -1 if x < 0 else 0
    return x >> (-shift)


@njit(cache=True, forceinline=True, error_model="numpy")
def _special(any_nan, pos_inf, neg_inf):
    """The class and sign of a result with special terms (FINITE when there are none)."""
    if any_nan or (pos_inf and neg_inf):
        return NAN, 0
    if pos_inf or neg_inf:
        return INF, int(neg_inf)
    return FINITE, 0


@njit(cache=True, forceinline=True, error_model="numpy")
def _with_special(cls, sign, any_nan, pos_inf, neg_inf):
    """The (NaN, +inf, -inf) seen so far, after a term of this class and sign."""
    return any_nan or cls == NAN, pos_inf or (cls == INF and sign == 0), neg_inf or (cls == INF and sign == 1)


@njit(cache=True, forceinline=True, error_model="numpy")
def _product_class(ca, cb):
    """Class of a product of two operand classes (NAN for inf * 0)."""
    if ca == NAN or cb == NAN:
        return NAN
    if ca == INF or cb == INF:
        return NAN if (ca == ZERO or cb == ZERO) else INF
    if ca == ZERO or cb == ZERO:
        return ZERO
    return FINITE


@njit(cache=True, forceinline=True, error_model="numpy")
def special_bits(cls, sign, out_kind):
    """Bits of a NaN, infinity or zero in the output format."""
    fp16 = out_kind == OUT_RNE_FP16
    width = 16 if fp16 else 32
    if cls == NAN:
        return (1 << (width - 1)) - 1
    if cls == INF:
        return (sign << (width - 1)) | ((0x1F << 10) if fp16 else (0xFF << 23))
    return sign << (width - 1)


@njit(cache=True, forceinline=True, error_model="numpy")
def round_out(sign, quantum, mag, out_kind, keep_zero_sign):
    """Bits of (-1)**sign * mag * 2**quantum (mag >= 0) in the output format and rounding."""
    if mag == 0:
        return 0  # an exact zero sum is +0
    if out_kind == OUT_RNE_FP16:
        bits, _ = round_pack(sign, quantum, mag, 5, 10, IEEE, RNE, False, False, False, 0, 32)
        width = 16
    elif out_kind == OUT_RNE_FP32:
        bits, _ = round_pack(sign, quantum, mag, 8, 23, IEEE, RNE, False, False, False, 0, 32)
        width = 32
    else:
        if quantum + msb_index(mag) > 127:  # truncation keeps the binade: past FP32's top it is inf
            return special_bits(INF, sign, out_kind)
        if out_kind == OUT_RZ_FP32:
            bits, _ = round_pack(sign, quantum, mag, 8, 23, IEEE, RTZ, False, False, False, 0, 32)
        else:  # FP32 with 13 fraction bits: the same exponent field, the fraction's low 10 bits zero
            bits, _ = round_pack(sign, quantum, mag, 8, 13, IEEE, RTZ, False, False, False, 0, 32)
            bits <<= 10
        width = 32
    if not keep_zero_sign and bits == sign << (width - 1):
        return 0  # a result rounded to zero is +0 (the NVIDIA adders), or keeps its sign
    return bits


@njit(cache=True, forceinline=True, error_model="numpy")
def step_truncated(a, b, i, j, t0, length, c, sa, sb, params):
    """One ADD_TRUNCATED step: products a[i, t] * b[j, t] (times their blocks' scales) for
    t0 <= t < t0 + length, and c -> output bits."""
    adder, _, frac_bits, e_zero, out_kind, group, block, scaled, frac_bits2 = params
    cls_a, sign_a, e_a, q_a, m_a = a
    cls_b, sign_b, e_b, q_b, m_b = b
    c_cls, c_sign, c_e, c_q, c_m = c
    any_nan, pos_inf, neg_inf = _with_special(c_cls, c_sign, False, False, False)
    emax = c_e if c_cls == FINITE else e_zero
    for t in range(t0, t0 + length):
        cls = _product_class(cls_a[i, t], cls_b[j, t])
        e = e_a[i, t] + e_b[j, t]
        if scaled:
            s = t // block
            cls_s = _product_class(sa[0][i, s], sb[0][j, s])
            cls = _product_class(cls, cls_s)
            e += sa[2][i, s] + sb[2][j, s]
        any_nan, pos_inf, neg_inf = _with_special(cls, sign_a[i, t] ^ sign_b[j, t], any_nan, pos_inf, neg_inf)
        if cls == ZERO:
            emax = max(emax, e_zero)
        elif cls == FINITE:
            emax = max(emax, e)
    cls, sign = _special(any_nan, pos_inf, neg_inf)
    if cls != FINITE:
        return special_bits(cls, sign, out_kind)
    quantum = emax - frac_bits
    total = 0
    if c_cls == FINITE:
        term = _aligned(c_m, c_q, quantum)
        total += -term if c_sign else term
    for t in range(t0, t0 + length):
        if cls_a[i, t] == FINITE and cls_b[j, t] == FINITE:
            m = m_a[i, t] * m_b[j, t]
            q = q_a[i, t] + q_b[j, t]
            if scaled:
                s = t // block
                if sa[0][i, s] != FINITE or sb[0][j, s] != FINITE:
                    continue  # a zero scale (a NaN one returned above)
                m *= sa[4][i, s] * sb[4][j, s]
                q += sa[3][i, s] + sb[3][j, s]
            term = _aligned(m, q, quantum)
            total += -term if sign_a[i, t] ^ sign_b[j, t] else term
    return round_out(int(total < 0), quantum, abs(total), out_kind, False)


@njit(cache=True, forceinline=True, error_model="numpy")
def _group_sum(a, b, i, j, t0, group, q_low):
    """(sum of the group's products as an integer multiple of 2**q_low, whether all are zero, NaN,
    +inf, -inf) for the products t0 <= t < t0 + group."""
    cls_a, sign_a, e_a, q_a, m_a = a
    cls_b, sign_b, e_b, q_b, m_b = b
    all_zero, any_nan, pos_inf, neg_inf = True, False, False, False
    p = 0
    for t in range(t0, t0 + group):
        cls = _product_class(cls_a[i, t], cls_b[j, t])
        any_nan, pos_inf, neg_inf = _with_special(cls, sign_a[i, t] ^ sign_b[j, t], any_nan, pos_inf, neg_inf)
        all_zero = all_zero and (cls == ZERO or cls == NAN)
        if cls == FINITE:
            m = (m_a[i, t] * m_b[j, t]) << (q_a[i, t] + q_b[j, t] - q_low)
            p += -m if sign_a[i, t] ^ sign_b[j, t] else m
    return p, all_zero, any_nan, pos_inf, neg_inf


@njit(cache=True, forceinline=True, error_model="numpy")
def step_groups(a, b, i, j, t0, length, c, sa, sb, params):
    """One ADD_GROUPS step: groups of ``group`` products summed exactly, scaled, then truncated."""
    adder, _, frac_bits, e_zero, out_kind, group, block, scaled, frac_bits2 = params
    c_cls, c_sign, c_e, c_q, c_m = c
    any_nan, pos_inf, neg_inf = _with_special(c_cls, c_sign, False, False, False)
    emax = c_e if c_cls == FINITE else e_zero
    # The lowest lsb exponent of the products: the group sums are exact integer multiples of it.
    q_low = 1 << 30
    for t in range(t0, t0 + length):
        if a[0][i, t] == FINITE and b[0][j, t] == FINITE:
            q_low = min(q_low, a[3][i, t] + b[3][j, t])
    for g in range(length // group):
        s = (t0 + g * group) // block
        p, all_zero, g_nan, g_pos, g_neg = _group_sum(a, b, i, j, t0 + g * group, group, q_low)
        cls_s = _product_class(sa[0][i, s], sb[0][j, s])
        any_nan = any_nan or g_nan or cls_s == NAN
        pos_inf = pos_inf or g_pos
        neg_inf = neg_inf or g_neg
        if all_zero or cls_s != FINITE:
            emax = max(emax, e_zero)
        else:
            emax = max(emax, sa[2][i, s] + sb[2][j, s])
    cls, sign = _special(any_nan, pos_inf, neg_inf)
    if cls != FINITE:
        return special_bits(cls, sign, out_kind)
    quantum = emax - frac_bits
    total = 0
    if c_cls == FINITE:
        term = _aligned(c_m, c_q, quantum)
        total += -term if c_sign else term
    for g in range(length // group):
        s = (t0 + g * group) // block
        if sa[0][i, s] != FINITE or sb[0][j, s] != FINITE:
            continue
        p = _group_sum(a, b, i, j, t0 + g * group, group, q_low)[0]
        term = _aligned(abs(p) * sa[4][i, s] * sb[4][j, s], q_low + sa[3][i, s] + sb[3][j, s], quantum)
        total += -term if p < 0 else term
    return round_out(int(total < 0), quantum, abs(total), out_kind, False)


@njit(cache=True, forceinline=True, error_model="numpy")
def _truncated_sum(a, b, i, j, t0, t1, stride, frac_bits, overflow_inf):
    """The products t0, t0 + stride, ... < t1 aligned on the largest (zeros take no part) and
    truncated to ``frac_bits`` bits: (emax, sum as a multiple of 2**(emax - frac_bits), NaN, +inf,
    -inf). A product of 2**128 or more is an infinity when ``overflow_inf``."""
    cls_a, sign_a, e_a, q_a, m_a = a
    cls_b, sign_b, e_b, q_b, m_b = b
    any_nan, pos_inf, neg_inf = False, False, False
    emax = e_inf = NO_EXPONENT
    for t in range(t0, t1, stride):
        cls = _product_class(cls_a[i, t], cls_b[j, t])
        if cls == FINITE and overflow_inf:
            if q_a[i, t] + q_b[j, t] + msb_index(m_a[i, t] * m_b[j, t]) >= 128:
                cls = INF
        any_nan, pos_inf, neg_inf = _with_special(cls, sign_a[i, t] ^ sign_b[j, t], any_nan, pos_inf, neg_inf)
        if cls == INF:
            # The exponent MMA-Sim gives an infinite product: an infinity counts as -1 (frexp's 0 - 1).
            e_inf = max(e_inf, (-1 if cls_a[i, t] == INF else e_a[i, t]) + (-1 if cls_b[j, t] == INF else e_b[j, t]))
        elif cls == FINITE:
            emax = max(emax, e_a[i, t] + e_b[j, t])
    total = 0
    if emax != NO_EXPONENT:
        quantum = emax - frac_bits
        for t in range(t0, t1, stride):
            if cls_a[i, t] == FINITE and cls_b[j, t] == FINITE:
                term = _aligned(m_a[i, t] * m_b[j, t], q_a[i, t] + q_b[j, t], quantum)
                total += -term if sign_a[i, t] ^ sign_b[j, t] else term
    return emax, total, any_nan, pos_inf, neg_inf, e_inf


@njit(cache=True, forceinline=True, error_model="numpy")
def step_c_apart(a, b, i, j, t0, length, c, params):
    """One ADD_C_APART(_SPLIT) step (AMD CDNA3): products truncated and summed, then c added with
    rounding down, then rounded to nearest even into FP32."""
    adder, _, frac_bits, e_zero, out_kind, group, block, scaled, frac_bits2 = params
    c_cls, c_sign, c_e, c_q, c_m = c
    if adder == ADD_C_APART_SPLIT:
        e_even, s_even, nan_even, pos_even, neg_even, inf_even = _truncated_sum(
            a, b, i, j, t0, t0 + length, 2, frac_bits, False)
        e_odd, s_odd, nan_odd, pos_odd, neg_odd, inf_odd = _truncated_sum(
            a, b, i, j, t0 + 1, t0 + length, 2, frac_bits, False)
        e_dot = max(e_even, e_odd)
        s_dot = _floor_shift(s_even, e_even - e_dot) + _floor_shift(s_odd, e_odd - e_dot)
        any_nan, pos_inf, neg_inf = nan_even or nan_odd, pos_even or pos_odd, neg_even or neg_odd
        # c more than frac_bits + 1 below the products is dropped; MMA-Sim reads a NaN or infinite c
        # at exponent -1, so large products drop it too (docs/hardware.md).
        if (c_cls == NAN or c_cls == INF) and max(e_dot, inf_even, inf_odd) > frac_bits:
            c_cls = ZERO
    else:
        e_dot, s_dot, any_nan, pos_inf, neg_inf, _ = _truncated_sum(a, b, i, j, t0, t0 + length, 1, frac_bits, True)
    any_nan, pos_inf, neg_inf = _with_special(c_cls, c_sign, any_nan, pos_inf, neg_inf)
    cls, sign = _special(any_nan, pos_inf, neg_inf)
    if cls != FINITE:
        return special_bits(cls, sign, out_kind)
    emax = max(e_dot, c_e)
    # The product sum keeps frac_bits2 + 1 bits below emax, c keeps frac_bits: both rounded down.
    quantum = emax - frac_bits2 - 1
    total = _floor_shift(s_dot, e_dot - frac_bits - quantum) if e_dot != NO_EXPONENT else 0
    if c_cls == FINITE and not (adder == ADD_C_APART_SPLIT and c_e < emax - frac_bits - 1):
        c_term = _floor_shift(-c_m if c_sign else c_m, c_q - (emax - frac_bits))
        total += c_term << (frac_bits2 + 1 - frac_bits)
    if total == 0:
        return 0
    # Normalised (at least FP32's minimum exponent) and rounded down to frac_bits2 fraction bits.
    top = max(quantum + msb_index(abs(total)), FP32_EMIN)
    shift = quantum - (top - frac_bits2)
    total = _floor_shift(total, shift)
    return round_out(int(total < 0), quantum - shift, abs(total), out_kind, True)


LIMB_BITS = 32
LIMBS = 20
LIMB_BASE = -288  # the exponent of the accumulator's lowest bit: below any product or FP32 value


@njit(cache=True, forceinline=True, error_model="numpy")
def _accumulate(limbs, sign, q, m):
    """limbs += (-1)**sign * m * 2**q (m < 2**31, q >= LIMB_BASE)."""
    offset = q - LIMB_BASE
    k = offset >> 5
    v = m << (offset & 31)
    if sign:
        limbs[k] -= v & 0xFFFFFFFF
        limbs[k + 1] -= v >> 32
    else:
        limbs[k] += v & 0xFFFFFFFF
        limbs[k + 1] += v >> 32


@njit(cache=True, forceinline=True, error_model="numpy")
def _exact_rounded(limbs):
    """The exact sum held in limbs, rounded to nearest even into FP32 bits (+0 for zero)."""
    for k in range(LIMBS - 1):  # carries: every limb but the top one in [0, 2**32)
        carry = limbs[k] >> 32
        limbs[k] -= carry << 32
        limbs[k + 1] += carry
    sign = int(limbs[LIMBS - 1] < 0)
    if sign:
        for k in range(LIMBS):
            limbs[k] = -limbs[k]
        for k in range(LIMBS - 1):
            carry = limbs[k] >> 32
            limbs[k] -= carry << 32
            limbs[k + 1] += carry
    top = LIMBS - 1
    while top >= 0 and limbs[top] == 0:
        top -= 1
    if top < 0:
        return 0
    if top == 0:
        return round_pack(sign, LIMB_BASE, limbs[0], 8, 23, IEEE, RNE, False, False, False, 0, 32)[0]
    m = (limbs[top] << 29) | (limbs[top - 1] >> 3)
    sticky = limbs[top - 1] & 7
    for k in range(top - 1):
        sticky |= limbs[k]
    m = (m << 1) | int(sticky != 0)
    quantum = LIMB_BASE + LIMB_BITS * (top - 1) + 2
    return round_pack(sign, quantum, m, 8, 23, IEEE, RNE, False, False, False, 0, 32)[0]


@njit(cache=True, forceinline=True, error_model="numpy")
def step_exact(a, b, i, j, t0, length, c, params):
    """One ADD_EXACT step (AMD CDNA1): the exact sum of the products and c, rounded once."""
    cls_a, sign_a, e_a, q_a, m_a = a
    cls_b, sign_b, e_b, q_b, m_b = b
    c_cls, c_sign, c_e, c_q, c_m = c
    any_nan, pos_inf, neg_inf = _with_special(c_cls, c_sign, False, False, False)
    limbs = np.zeros(LIMBS, np.int64)
    if c_cls == FINITE:
        _accumulate(limbs, c_sign, c_q, c_m)
    for t in range(t0, t0 + length):
        cls = _product_class(cls_a[i, t], cls_b[j, t])
        any_nan, pos_inf, neg_inf = _with_special(cls, sign_a[i, t] ^ sign_b[j, t], any_nan, pos_inf, neg_inf)
        if cls == FINITE:
            m = m_a[i, t] * m_b[j, t]
            q = q_a[i, t] + q_b[j, t]
            sign = sign_a[i, t] ^ sign_b[j, t]
            _accumulate(limbs, sign, q, m & 0x7FFFFFFF)  # a product has at most 48 bits: two halves
            if m >> 31:
                _accumulate(limbs, sign, q + 31, m >> 31)
    cls, sign = _special(any_nan, pos_inf, neg_inf)
    if cls != FINITE:
        return special_bits(cls, sign, OUT_RNE_FP32)
    return _exact_rounded(limbs)


@njit(cache=True, forceinline=True, error_model="numpy")
def _sum_fp32(cls_x, sign_x, q_x, m_x, cls_y, sign_y, q_y, m_y):
    """FP32 bits of x + y (exact values) rounded once to nearest even, IEEE 754's specials."""
    if cls_x == NAN or cls_y == NAN:
        return special_bits(NAN, 0, OUT_RNE_FP32)
    if cls_x == INF:
        if cls_y == INF and sign_x != sign_y:
            return special_bits(NAN, 0, OUT_RNE_FP32)
        return special_bits(INF, sign_x, OUT_RNE_FP32)
    if cls_y == INF:
        return special_bits(INF, sign_y, OUT_RNE_FP32)
    if cls_x == ZERO and cls_y == ZERO:
        return exact_zero_sign(sign_x, sign_y, RNE) << 31
    if cls_x == ZERO:
        return round_pack(sign_y, q_y, m_y, 8, 23, IEEE, RNE, False, False, False, 0, 32)[0]
    if cls_y == ZERO:
        return round_pack(sign_x, q_x, m_x, 8, 23, IEEE, RNE, False, False, False, 0, 32)[0]
    sign, exp, sig = add_finite(sign_x, q_x, m_x, sign_y, q_y, m_y, RNE)
    if sig == 0:
        return sign << 31
    return round_pack(sign, exp, sig, 8, 23, IEEE, RNE, False, False, False, 0, 32)[0]


FP32 = (8, 23, IEEE, 0, 0xFFFFFFFF)


@njit(cache=True, forceinline=True, error_model="numpy")
def _flushed(bits):
    """FP32 bits with a subnormal flushed to the zero of its sign."""
    return bits & 0x80000000 if (bits & 0x7F800000) == 0 else bits


@njit(cache=True, forceinline=True, error_model="numpy")
def _add_flushed(x, y):
    cx, sx, _, qx, mx = decode_one(x, FP32)
    cy, sy, _, qy, my = decode_one(y, FP32)
    return _flushed(_sum_fp32(cx, sx, qx, mx, cy, sy, qy, my))


@njit(cache=True, forceinline=True, error_model="numpy")
def _product_flushed(a, b, i, j, t):
    """FP32 bits of a[i, t] * b[j, t] with subnormal inputs read as +0 and a subnormal result flushed."""
    cls_a, sign_a, e_a, q_a, m_a = a
    cls_b, sign_b, e_b, q_b, m_b = b
    ca, sa = cls_a[i, t], sign_a[i, t]
    cb, sb = cls_b[j, t], sign_b[j, t]
    # A subnormal's significand has fewer bits than the format's fraction (e - q).
    if ca == ZERO or (ca == FINITE and msb_index(m_a[i, t]) < e_a[i, t] - q_a[i, t]):
        ca, sa = ZERO, 0
    if cb == ZERO or (cb == FINITE and msb_index(m_b[j, t]) < e_b[j, t] - q_b[j, t]):
        cb, sb = ZERO, 0
    cls = _product_class(ca, cb)
    sign = sa ^ sb
    if cls != FINITE:
        return special_bits(cls, sign, OUT_RNE_FP32)
    q, m = q_a[i, t] + q_b[j, t], m_a[i, t] * m_b[j, t]
    return _flushed(round_pack(sign, q, m, 8, 23, IEEE, RNE, False, False, False, 0, 32)[0])


@njit(cache=True, forceinline=True, error_model="numpy")
def step_ftz(a, b, i, j, t0, length, c_bits, params):
    """One ADD_FTZ_PAIRS / ADD_FTZ_QUADS step (AMD CDNA2)."""
    adder = params[0]
    c_bits = 0 if (c_bits & 0x7F800000) == 0 else c_bits  # a subnormal or zero c is +0
    width = 4 if adder == ADD_FTZ_QUADS else 2
    for t in range(t0, t0 + length, width):
        s = _add_flushed(_product_flushed(a, b, i, j, t), _product_flushed(a, b, i, j, t + 1))
        if width == 4:
            s2 = _add_flushed(_product_flushed(a, b, i, j, t + 2), _product_flushed(a, b, i, j, t + 3))
            s = _add_flushed(s, s2)
        c_bits = _add_flushed(c_bits, s)
    return c_bits


@njit(cache=True, forceinline=True, error_model="numpy")
def step_fma(a, b, i, j, t0, length, c_bits):
    """One ADD_FMA step: c = a[i, t] * b[j, t] + c rounded once, for each t in order."""
    cls_a, sign_a, e_a, q_a, m_a = a
    cls_b, sign_b, e_b, q_b, m_b = b
    for t in range(t0, t0 + length):
        cc, sc, _, qc, mc = decode_one(c_bits, FP32)
        cls = _product_class(cls_a[i, t], cls_b[j, t])
        sign = sign_a[i, t] ^ sign_b[j, t]
        c_bits = _sum_fp32(cls, sign, q_a[i, t] + q_b[j, t], m_a[i, t] * m_b[j, t], cc, sc, qc, mc)
    return c_bits


@njit(cache=True, parallel=True, error_model="numpy")
def mma_gemm(a, b, c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params):
    """out[i, j] = the instruction chained over K: steps of ``params[1]`` products in k order,
    each step's result (bits of the D format) the next step's c. Rows run in parallel; every
    element is computed alone, so the bits do not depend on the thread count."""
    adder, length = params[0], params[1]
    k = a[0].shape[1]
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            bits = c_bits[i, j] if has_c else 0
            c = decode_one(bits, c_fmt)
            for t0 in range(0, k, length):
                if adder == ADD_TRUNCATED:
                    bits = step_truncated(a, b, i, j, t0, length, c, sa, sb, params)
                elif adder == ADD_GROUPS:
                    bits = step_groups(a, b, i, j, t0, length, c, sa, sb, params)
                elif adder == ADD_C_APART or adder == ADD_C_APART_SPLIT:
                    bits = step_c_apart(a, b, i, j, t0, length, c, params)
                elif adder == ADD_EXACT:
                    bits = step_exact(a, b, i, j, t0, length, c, params)
                elif adder == ADD_FMA:
                    bits = step_fma(a, b, i, j, t0, length, bits)
                else:
                    bits = step_ftz(a, b, i, j, t0, length, bits, params)
                c = decode_one(bits, d_fmt)
            out[i, j] = bits
