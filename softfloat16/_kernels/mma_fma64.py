"""IEEE 754 binary64 fused multiply-add, exact, in integers: the FP64 matrix-unit instructions
(NVIDIA ``mma .f64``, AMD ``mfma f64``) are a chain of them, ``c = a[t] * b[t] + c`` for each t in
order, each rounded once to nearest even (softfloat16.mma).

A pattern is held in an int64 (the uint64 pattern reinterpreted: the sign is the int64's sign).
The 106-bit product is two limbs of radix 2**56; the exact sum of the product and ``c`` is at most
three limbs once an operand far below the other is replaced by a sticky bit (it cannot change the
rounding; :func:`fma64` says why), then rounded to 53 bits (fewer for a subnormal result), an
overflow giving an infinity. A NaN result is ``NAN64`` (0x7fffffffffffffff); an exact zero sum is
+0 unless both the product and ``c`` are -0. Nothing here uses the host's floating point.
"""
import numpy as np
from numba import njit, prange

from .core import msb_index

RADIX = 56
MASK = (1 << RADIX) - 1
FRACTION = (1 << 52) - 1
SIGN = np.int64(-(1 << 63))  # the sign bit of a pattern held in an int64
NAN64 = np.int64((1 << 63) - 1)
INF64 = np.int64(0x7FF << 52)
ONE64 = np.int64(0x3FF << 52)
FINITE, ZERO, INF, NAN = 0, 1, 2, 3


@njit(cache=True, forceinline=True, error_model="numpy")
def unpack64(bits):
    """(class, sign, q, m) of a binary64 pattern: a finite value is (-1)**sign * m * 2**q."""
    sign = int(bits < 0)
    field = (bits >> 52) & 0x7FF
    frac = bits & FRACTION
    if field == 0x7FF:
        return (NAN if frac else INF), sign, 0, 0
    if field == 0:
        if frac == 0:
            return ZERO, sign, 0, 0
        return FINITE, sign, -1074, frac
    return FINITE, sign, field - 1075, frac | (1 << 52)


@njit(cache=True, forceinline=True, error_model="numpy")
def round64(sign, q, sig):
    """The pattern of (-1)**sign * sig * 2**q rounded to nearest even (0 < sig < 2**62): subnormal
    results keep the bits above 2**-1074, a result of 2**1024 or more is an infinity."""
    top = q + msb_index(sig)
    if top >= 1024:
        return INF64 | SIGN if sign else INF64
    quantum = max(top - 52, -1074)
    shift = quantum - q
    if shift <= 0:
        kept = sig << (-shift)
    elif shift >= 63:
        kept = 0  # sig < 2**62 <= half of 2**shift: rounds to zero
    else:
        kept = sig >> shift
        rest = sig & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and (kept & 1)):
            kept += 1
    # kept < 2**53 (2**53 after a carry: the next binade, which the addition below lands on).
    bits = ((quantum + 1074) << 52) + kept
    if bits >= INF64:
        bits = INF64
    return bits | SIGN if sign else bits


@njit(cache=True, forceinline=True, error_model="numpy")
def _product(ma, mb):
    """ma * mb (each < 2**53) as limbs (high, low) of radix 2**56."""
    ah, al = ma >> 28, ma & ((1 << 28) - 1)
    bh, bl = mb >> 28, mb & ((1 << 28) - 1)
    mid = ah * bl + al * bh  # < 2**54
    low = al * bl + ((mid & ((1 << 28) - 1)) << 28)  # < 2**57
    high = ah * bh + (mid >> 28) + (low >> RADIX)
    return high, low & MASK


@njit(cache=True, forceinline=True, error_model="numpy")
def _placed(high, low, shift):
    """(high * 2**56 + low) * 2**shift as three limbs (the result is below 2**168; 0 <= shift)."""
    k, r = shift // RADIX, shift % RADIX
    keep = (1 << (RADIX - r)) - 1
    y0 = (low & keep) << r
    y1 = ((high & keep) << r) | (low >> (RADIX - r))
    y2 = high >> (RADIX - r)
    if k == 0:
        return y2, y1, y0
    if k == 1:
        return y1, y0, 0
    return y0, 0, 0


@njit(cache=True, forceinline=True, error_model="numpy")
def _top_bits(m2, m1, m0):
    """(top, sig): the magnitude m2 * 2**112 + m1 * 2**56 + m0 (> 0) has its highest bit at ``top``;
    sig is its 60 highest bits (bit 59 the highest) with any lower 1 bit OR-ed into bit 0."""
    if m2:
        top = 2 * RADIX + msb_index(m2)
    elif m1:
        top = RADIX + msb_index(m1)
    else:
        top = msb_index(m0)
    d = top - 59  # bits below the 60 kept
    if d <= 0:
        return top, ((m1 << RADIX) | m0) << (-d)  # then the value is below 2**60: m1 < 2**4
    k, r = d // RADIX, d % RADIX
    if k == 0:
        sig = (m0 >> r) | ((m1 << (RADIX - r)) if m1 else 0)
        if m2:  # then r >= 52 (the value is below 2**(60 + r))
            sig |= m2 << (2 * RADIX - r)
        sticky = m0 & ((1 << r) - 1)
    elif k == 1:
        sig = (m1 >> r) | ((m2 << (RADIX - r)) if m2 else 0)
        sticky = m0 | (m1 & ((1 << r) - 1))
    else:
        sig = m2 >> r
        sticky = m0 | m1 | (m2 & ((1 << r) - 1))
    return top, sig | int(sticky != 0)


@njit(cache=True, forceinline=True, error_model="numpy")
def fma64(a, b, c):
    """The binary64 pattern of a * b + c, rounded once to nearest even (IEEE 754 fusedMultiplyAdd).

    With P = a * b and C = c nonzero, each m * 2**q with its top bit at t: if P lies wholly below
    2**(q_C - 2) it is below a quarter of c's ulp (or of the ulp below a power of two), so the
    result is c. If C lies wholly below 2**(q_P - 2), it is replaced by 2**(q_P - 3) of its sign:
    both sums then lie strictly between the same two multiples of 2**(q_P - 2), while every
    representable number and every midpoint of the result is a multiple of 2**q_P or coarser (the
    result is at least 2**(t_P - 1), whose 53-bit quantum is far above; a subnormal quantum,
    2**-1075 at the midpoints, is above q_P whenever P is that small). Otherwise the two are at
    most 160 bits apart, top to bottom, and their sum is exact in three limbs."""
    ca, sa, qa, ma = unpack64(a)
    cb, sb, qb, mb = unpack64(b)
    cc, sc, qc, mc = unpack64(c)
    sp = sa ^ sb
    if ca == NAN or cb == NAN or cc == NAN:
        return NAN64
    if ca == INF or cb == INF:
        if ca == ZERO or cb == ZERO or (cc == INF and sc != sp):
            return NAN64
        return INF64 | SIGN if sp else INF64
    if cc == INF:
        return c
    if ca == ZERO or cb == ZERO:
        if cc == ZERO:
            return SIGN if (sp and sc) else np.int64(0)  # an exact zero: -0 only if both are -0
        return c
    high, low = _product(ma, mb)
    tp = qa + qb + (RADIX + msb_index(high) if high else msb_index(low))
    qp = qa + qb
    if cc == ZERO:
        mc, qc = 0, qp
    else:
        tc = qc + msb_index(mc)
        if tp < qc - 2:
            return c
        if tc < qp - 2:
            mc, qc = 1, qp - 3
    base = min(qp, qc)
    p2, p1, p0 = _placed(high, low, qp - base)
    c2, c1, c0 = _placed(0, mc, qc - base)
    if sp:
        p2, p1, p0 = -p2, -p1, -p0
    if sc:
        c2, c1, c0 = -c2, -c1, -c0
    s0, s1, s2 = p0 + c0, p1 + c1, p2 + c2
    s1 += s0 >> RADIX  # carries (floor): limbs 0 and 1 in [0, 2**56), the sign in limb 2
    s0 &= MASK
    s2 += s1 >> RADIX
    s1 &= MASK
    sign = int(s2 < 0)
    if sign:
        s0, s1, s2 = -s0, -s1, -s2
        s1 += s0 >> RADIX
        s0 &= MASK
        s2 += s1 >> RADIX
        s1 &= MASK
    if s2 == 0 and s1 == 0 and s0 == 0:
        return np.int64(0)  # an exact zero sum of nonzero terms: +0
    top, sig = _top_bits(s2, s1, s0)
    return round64(sign, base + top - 59, sig)


@njit(cache=True, parallel=True, error_model="numpy")
def fma64_gemm(a, bt, c, out):
    """out[i, j] = the chain c = a[i, t] * bt[j, t] + c over t in order, from c[i, j] (int64
    patterns; rows in parallel, every element alone: no thread count changes a bit)."""
    k = a.shape[1]
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            acc = c[i, j]
            for t in range(k):
                acc = fma64(a[i, t], bt[j, t], acc)
            out[i, j] = acc


@njit(cache=True, parallel=True, error_model="numpy")
def add64(x, y, out):
    """out = x + y elementwise (int64 patterns of flat arrays), rounded once: x * 1 + y."""
    for i in prange(out.shape[0]):
        out[i] = fma64(x[i], ONE64, y[i])
