"""Fused matrix multiply: exact products, accumulation in one format in a fixed order.

``C[i, j] = sum_k A[i, k] * B[k, j]`` where every product is exact (two significands of at most
24 bits multiply into at most 48 bits, an int64) and every addition is rounded once to the
accumulation format, in a defined order; the finished sum is rounded once more, to the output
format. The kernels take ``A`` as ``(m, k)`` and ``B`` transposed, ``(n, k)``, both already
unpacked (see :func:`unpack_matrix`), so the inner loop reads two contiguous rows and does no
unpacking of operands. Rows of ``C`` are independent, so they run in parallel; each element is
computed by one thread in the same order whatever the thread count, so the result never depends
on it.

A value in flight is ``(cls, sign, exp, sig)`` as :func:`core.unpack` returns it. A sum of no
terms is +0. NaN results (a NaN operand, inf * 0, inf - inf) are the output format's default NaN
(+qNaN with only the quiet bit set); payloads are not propagated.
"""
import numpy as np
from numba import njit, prange

from .arith import add_finite
from .core import FINITE, INF, NAN, ZERO, round_pack, unpack

# Rounding-mode code of round-toward-negative (shared with softfloat16.rounding.Rounding.RDN):
# the only mode in which an exact zero sum of opposite-signed terms is -0.
_RDN = 4
_MAX_DEPTH = 64  # pairwise partial sums on the stack: enough for k < 2**63


@njit(cache=True, error_model="numpy")
def unpack_matrix(bits, ebits, fbits):
    """Unpack a 2-D array of bit patterns once: (cls, sign) int8 and (exp, sig) int32 arrays.

    Narrow types keep the rows the inner loop streams small (10 bytes per value); every
    significand and exponent of a format of at most 32 bits fits.
    """
    rows, cols = bits.shape
    cls = np.empty((rows, cols), np.int8)
    sign = np.empty((rows, cols), np.int8)
    exp = np.empty((rows, cols), np.int32)
    sig = np.empty((rows, cols), np.int32)
    for i in range(rows):
        for j in range(cols):
            c, s, e, g = unpack(bits[i, j], ebits, fbits, False)
            cls[i, j], sign[i, j], exp[i, j], sig[i, j] = c, s, e, g
    return cls, sign, exp, sig


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
def add_round(cls_x, sign_x, exp_x, sig_x, cls_y, sign_y, exp_y, sig_y, ebits, fbits, rounding):
    """x + y rounded once to the (ebits, fbits) format, as an unpacked value.

    x and y are exact values (sums already rounded, or exact products); IEEE rules for zeros,
    infinities and NaN.
    """
    if cls_x == FINITE and cls_y == FINITE:
        sign, exp, sig = add_finite(sign_x, exp_x, sig_x, sign_y, exp_y, sig_y, rounding)
        if sig == 0:
            return ZERO, sign, 0, 0
        bits, _ = round_pack(sign, exp, sig, ebits, fbits, rounding, False, False)
        return unpack(bits, ebits, fbits, False)
    if cls_x == NAN or cls_y == NAN:
        return NAN, 0, 0, 0
    if cls_x == INF or cls_y == INF:
        if cls_x == INF and cls_y == INF and sign_x != sign_y:
            return NAN, 0, 0, 0  # inf - inf
        return INF, (sign_x if cls_x == INF else sign_y), 0, 0
    if cls_x == ZERO and cls_y == ZERO:
        same = sign_x == sign_y
        return ZERO, (sign_x if same else int(rounding == _RDN)), 0, 0
    # One term is zero: the sum is the other one, rounded (an exact product may need it).
    if cls_x == ZERO:
        bits, _ = round_pack(sign_y, exp_y, sig_y, ebits, fbits, rounding, False, False)
    else:
        bits, _ = round_pack(sign_x, exp_x, sig_x, ebits, fbits, rounding, False, False)
    return unpack(bits, ebits, fbits, False)


@njit(cache=True, inline="always")
def pack_result(cls, sign, exp, sig, ebits, fbits, rounding):
    """Bits of an unpacked value rounded to the output format (the one final rounding)."""
    sign_bit = sign << (ebits + fbits)
    inf_bits = ((1 << ebits) - 1) << fbits
    if cls == FINITE:
        bits, _ = round_pack(sign, exp, sig, ebits, fbits, rounding, False, False)
        return bits
    if cls == ZERO:
        return sign_bit
    if cls == INF:
        return sign_bit | inf_bits
    return inf_bits | (1 << (fbits - 1))  # the default NaN


@njit(cache=True, inline="always")
def sequential_row(a, bt, out, i, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding):
    """Row i of the sequential kernel: out[i, j] = ((0 + p_0) + p_1) + ... + p_{k-1}."""
    cls_a, sign_a, exp_a, sig_a = a
    cls_b, sign_b, exp_b, sig_b = bt
    k = cls_a.shape[1]
    for j in range(cls_b.shape[0]):
        cls, sign, exp, sig = ZERO, 0, 0, 0
        for t in range(k):
            class_a, class_b = cls_a[i, t], cls_b[j, t]
            if class_a <= FINITE and class_b <= FINITE and class_a * class_b == ZERO:
                if cls != ZERO:
                    continue  # acc + (+-0) == acc: ReLU zeros cost nothing
            elif class_a == FINITE and class_b == FINITE and cls == FINITE:
                # The common case, kept short: exact product, one add, one rounding.
                s, e, g = add_finite(
                    sign, exp, sig, int(sign_a[i, t] ^ sign_b[j, t]), int(exp_a[i, t]) + int(exp_b[j, t]),
                    int(sig_a[i, t]) * int(sig_b[j, t]), rounding,
                )
                if g == 0:
                    cls, sign, exp, sig = ZERO, s, 0, 0
                else:
                    bits, _ = round_pack(s, e, g, acc_ebits, acc_fbits, rounding, False, False)
                    cls, sign, exp, sig = unpack(bits, acc_ebits, acc_fbits, False)
                continue
            pc, ps, pe, pg = product(
                cls_a[i, t], sign_a[i, t], exp_a[i, t], sig_a[i, t],
                cls_b[j, t], sign_b[j, t], exp_b[j, t], sig_b[j, t],
            )
            cls, sign, exp, sig = add_round(
                cls, sign, exp, sig, pc, ps, pe, pg, acc_ebits, acc_fbits, rounding
            )
        out[i, j] = pack_result(cls, sign, exp, sig, out_ebits, out_fbits, rounding)


@njit(cache=True, inline="always")
def pairwise_row(a, bt, out, i, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding):
    """Row i of the pairwise kernel: out[i, j] = the products summed as a binary tree, each +
    rounded to the accumulation format.

    The tree is the one a binary counter builds: product t is pushed; while the two newest partial
    sums cover equally many products they are replaced by their sum (older + newer). At the end
    the remaining partial sums (covering 2**a > 2**b > ... products) are added newest first:
    ``S_a + (S_b + (... + S_z))``. For k a power of two this is the balanced tree
    ``((p0 + p1) + (p2 + p3)) + ...``. Every + takes exact operands (products are not rounded
    before their first addition); k == 1 gives the rounded product, k == 0 gives +0.
    """
    cls_a, sign_a, exp_a, sig_a = a
    cls_b, sign_b, exp_b, sig_b = bt
    k = cls_a.shape[1]
    stack_cls = np.empty(_MAX_DEPTH, np.int64)
    stack_sign = np.empty(_MAX_DEPTH, np.int64)
    stack_exp = np.empty(_MAX_DEPTH, np.int64)
    stack_sig = np.empty(_MAX_DEPTH, np.int64)
    stack_size = np.empty(_MAX_DEPTH, np.int64)
    for j in range(cls_b.shape[0]):
        depth = 0
        for t in range(k):
            pc, ps, pe, pg = product(
                cls_a[i, t], sign_a[i, t], exp_a[i, t], sig_a[i, t],
                cls_b[j, t], sign_b[j, t], exp_b[j, t], sig_b[j, t],
            )
            size = 1
            while depth > 0 and stack_size[depth - 1] == size:
                depth -= 1
                pc, ps, pe, pg = add_round(
                    stack_cls[depth], stack_sign[depth], stack_exp[depth], stack_sig[depth],
                    pc, ps, pe, pg, acc_ebits, acc_fbits, rounding,
                )
                size *= 2
            stack_cls[depth], stack_sign[depth] = pc, ps
            stack_exp[depth], stack_sig[depth], stack_size[depth] = pe, pg, size
            depth += 1
        if depth == 0:
            cls, sign, exp, sig = ZERO, 0, 0, 0
        else:
            depth -= 1
            cls, sign = stack_cls[depth], stack_sign[depth]
            exp, sig = stack_exp[depth], stack_sig[depth]
            if depth == 0 and stack_size[0] == 1:  # k == 1: round the lone product
                cls, sign, exp, sig = add_round(
                    ZERO, 0, 0, 0, cls, sign, exp, sig, acc_ebits, acc_fbits, rounding
                )
            while depth > 0:
                depth -= 1
                cls, sign, exp, sig = add_round(
                    stack_cls[depth], stack_sign[depth], stack_exp[depth], stack_sig[depth],
                    cls, sign, exp, sig, acc_ebits, acc_fbits, rounding,
                )
        out[i, j] = pack_result(cls, sign, exp, sig, out_ebits, out_fbits, rounding)


# Each policy comes as a serial kernel and a row-parallel one. Every output element is computed
# by one thread in the same order either way, so the two give identical bits; the parallel one
# only pays off for large products (starting threads costs more than a small matmul). The
# arguments: ``a`` and ``bt``, the tuples of unpack_matrix for A (m, k) and B transposed (n, k);
# ``out``, an (m, n) uint32 array for the output bit patterns; the accumulation and output
# formats' widths; the rounding-mode code. (Folding formats and mode in as compile-time
# constants, as loops.py does, was measured: no faster here, and more to compile.)


@njit(cache=True, error_model="numpy")
def matmul_sequential(a, bt, out, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding):
    """out[i, j] = ((0 + p_0) + p_1) + ... + p_{k-1}, each + rounded to the accumulation format."""
    for i in range(out.shape[0]):
        sequential_row(a, bt, out, i, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding)


@njit(cache=True, parallel=True, error_model="numpy")
def matmul_sequential_parallel(a, bt, out, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding):
    """matmul_sequential with rows spread over threads (same bits)."""
    for i in prange(out.shape[0]):
        sequential_row(a, bt, out, i, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding)


@njit(cache=True, error_model="numpy")
def matmul_pairwise(a, bt, out, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding):
    """out[i, j] = the products summed as a binary tree (see pairwise_row)."""
    for i in range(out.shape[0]):
        pairwise_row(a, bt, out, i, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding)


@njit(cache=True, parallel=True, error_model="numpy")
def matmul_pairwise_parallel(a, bt, out, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding):
    """matmul_pairwise with rows spread over threads (same bits)."""
    for i in prange(out.shape[0]):
        pairwise_row(a, bt, out, i, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding)
