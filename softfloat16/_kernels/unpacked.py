"""Values in flight as ``(cls, sign, exp, sig)``, the form :func:`core.unpack` returns: the exact
product of two such values and the final rounding to bits, shared by the matmul policies
(matmul.py).
"""
from numba import njit

from .core import FINITE, IEEE, INF, NAN, ZERO, round_pack


@njit(cache=True, inline="always")
def product(cls_a, sign_a, exp_a, sig_a, cls_b, sign_b, exp_b, sig_b):
    """The exact product of two unpacked values, as an unpacked value (int64 fields)."""
    sign = int(sign_a) ^ int(sign_b)
    if cls_a == FINITE and cls_b == FINITE:
        return FINITE, sign, int(exp_a) + int(exp_b), int(sig_a) * int(sig_b)
    if cls_a == NAN or cls_b == NAN:
        return NAN, 0, 0, 0
    if cls_a == INF or cls_b == INF:
        if cls_a == ZERO or cls_b == ZERO:
            return NAN, 0, 0, 0  # inf * 0
        return INF, sign, 0, 0
    return ZERO, sign, 0, 0


@njit(cache=True, inline="always")
def pack_result(cls, sign, exp, sig, ebits, fbits, rounding):
    """Bits of an unpacked value rounded to the output format (the one final rounding)."""
    sign_bit = sign << (ebits + fbits)
    inf_bits = ((1 << ebits) - 1) << fbits
    if cls == FINITE:
        bits, _ = round_pack(sign, exp, sig, ebits, fbits, IEEE, rounding, False, False, False, 0, 32)
        return bits
    if cls == ZERO:
        return sign_bit
    if cls == INF:
        return sign_bit | inf_bits
    return inf_bits | (1 << (fbits - 1))  # the default NaN
