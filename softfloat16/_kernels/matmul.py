"""Fused matrix multiply: exact products, accumulation in one format in a fixed order.

``C[i, j] = sum_k A[i, k] * B[k, j]`` where every product is exact (two significands of at most
24 bits multiply into at most 48 bits, an int64) and every addition is rounded once to the
accumulation format, in a defined order; the finished sum is rounded once more, to the output
format. The scalar kernels take ``A`` as ``(m, k)`` and ``B`` transposed, ``(n, k)``, both
already unpacked (see :func:`unpack_matrix`), so the inner loop reads two contiguous rows and does
no unpacking of operands. These scalar kernels define the orders; linalg.matmul runs them in SIMD
lanes where it can, with the same bits: the sequential order for FP16/BF16 inputs into FP32 in
uint32 lanes (:func:`make_sequential_lanes`), every order for inputs and accumulators of at most 8
exponent bits in float64 lanes (``matmul_lanes``), a lane falling back to the cell functions here
(:func:`sequential_cell`, :func:`pairwise_cell`) when it meets what the lanes decline. Rows of
``C`` are independent, so they run in parallel; each element is computed by one thread in the same
order whatever the thread count, so the result never depends on it.

A value in flight is ``(cls, sign, exp, sig)`` as :func:`core.unpack` returns it. A sum of no
terms is +0. NaN results (a NaN operand, inf * 0, inf - inf) are the output format's default NaN
(+qNaN with only the quiet bit set); payloads are not propagated.
"""
from collections import namedtuple

import numpy as np
from numba import njit, prange

from .arith import add_finite
from .core import FINITE, IEEE, INF, NAN, RDN, ZERO, round_pack, unpack
from .fast import add_normal, u32
from .unpacked import pack_result, product

_MAX_DEPTH = 64  # pairwise partial sums on the stack: enough for k < 2**63


@njit(cache=True, error_model="numpy")
def unpack_matrix(bits, ebits, fbits, encoding):
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
            c, s, e, g = unpack(bits[i, j], ebits, fbits, encoding, False)
            cls[i, j], sign[i, j], exp[i, j], sig[i, j] = c, s, e, g
    return cls, sign, exp, sig


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
        bits, _ = round_pack(sign, exp, sig, ebits, fbits, IEEE, rounding, False, False, False, 0, 32)
        return unpack(bits, ebits, fbits, IEEE, False)
    if cls_x == NAN or cls_y == NAN:
        return NAN, 0, 0, 0
    if cls_x == INF or cls_y == INF:
        if cls_x == INF and cls_y == INF and sign_x != sign_y:
            return NAN, 0, 0, 0  # inf - inf
        return INF, (sign_x if cls_x == INF else sign_y), 0, 0
    if cls_x == ZERO and cls_y == ZERO:
        same = sign_x == sign_y
        return ZERO, (sign_x if same else int(rounding == RDN)), 0, 0  # -0 only when rounding down
    # One term is zero: the sum is the other one, rounded (an exact product may need it).
    if cls_x == ZERO:
        bits, _ = round_pack(sign_y, exp_y, sig_y, ebits, fbits, IEEE, rounding, False, False, False, 0, 32)
    else:
        bits, _ = round_pack(sign_x, exp_x, sig_x, ebits, fbits, IEEE, rounding, False, False, False, 0, 32)
    return unpack(bits, ebits, fbits, IEEE, False)


@njit(cache=True, inline="always")
def sequential_cell(a, bt, i, j, params):
    """C[i, j] of the sequential order: ((0 + p_0) + p_1) + ... + p_{k-1}, then the output rounding."""
    acc_ebits, acc_fbits, out_ebits, out_fbits, rounding = params
    cls_a, sign_a, exp_a, sig_a = a
    cls_b, sign_b, exp_b, sig_b = bt
    cls, sign, exp, sig = ZERO, 0, 0, 0
    for t in range(cls_a.shape[1]):
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
                bits, _ = round_pack(s, e, g, acc_ebits, acc_fbits, IEEE, rounding, False, False, False, 0, 32)
                cls, sign, exp, sig = unpack(bits, acc_ebits, acc_fbits, IEEE, False)
            continue
        pc, ps, pe, pg = product(
            cls_a[i, t], sign_a[i, t], exp_a[i, t], sig_a[i, t],
            cls_b[j, t], sign_b[j, t], exp_b[j, t], sig_b[j, t],
        )
        cls, sign, exp, sig = add_round(
            cls, sign, exp, sig, pc, ps, pe, pg, acc_ebits, acc_fbits, rounding
        )
    return pack_result(cls, sign, exp, sig, out_ebits, out_fbits, rounding)


@njit(cache=True, error_model="numpy")
def sequential_row(a, bt, out, i, params):
    """Row i of the sequential kernel: out[i, j] = ((0 + p_0) + p_1) + ... + p_{k-1}."""
    for j in range(bt[0].shape[0]):
        out[i, j] = sequential_cell(a, bt, i, j, params)


@njit(cache=True, error_model="numpy")
def pairwise_stacks():
    """Scratch for pairwise_cell: the partial sums' (cls, sign, exp, sig) and sizes."""
    return (np.empty(_MAX_DEPTH, np.int64), np.empty(_MAX_DEPTH, np.int64), np.empty(_MAX_DEPTH, np.int64),
            np.empty(_MAX_DEPTH, np.int64), np.empty(_MAX_DEPTH, np.int64))


@njit(cache=True, inline="always")
def pairwise_cell(a, bt, i, j, params, stacks):
    """C[i, j] of the pairwise order (see pairwise_row), then the output rounding; ``stacks`` is
    pairwise_stacks()'s scratch."""
    acc_ebits, acc_fbits, out_ebits, out_fbits, rounding = params
    cls_a, sign_a, exp_a, sig_a = a
    cls_b, sign_b, exp_b, sig_b = bt
    stack_cls, stack_sign, stack_exp, stack_sig, stack_size = stacks
    depth = 0
    for t in range(cls_a.shape[1]):
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
    return pack_result(cls, sign, exp, sig, out_ebits, out_fbits, rounding)


@njit(cache=True, error_model="numpy")
def pairwise_row(a, bt, out, i, params):
    """Row i of the pairwise kernel: out[i, j] = the products summed as a binary tree, each +
    rounded to the accumulation format.

    The tree is the one a binary counter builds: product t is pushed; while the two newest partial
    sums cover equally many products they are replaced by their sum (older + newer). At the end
    the remaining partial sums (covering 2**a > 2**b > ... products) are added newest first:
    ``S_a + (S_b + (... + S_z))``. For k a power of two this is the balanced tree
    ``((p0 + p1) + (p2 + p3)) + ...``. Every + takes exact operands (products are not rounded
    before their first addition); k == 1 gives the rounded product, k == 0 gives +0.
    """
    stacks = pairwise_stacks()
    for j in range(bt[0].shape[0]):
        out[i, j] = pairwise_cell(a, bt, i, j, params, stacks)


# Each policy comes as a serial kernel and a row-parallel one, from make_matmul. Every output
# element is computed by one thread in the same order either way, so the two give identical bits;
# the parallel one only pays off for large products (starting threads costs more than a small
# matmul). (Folding formats and mode in as compile-time constants, as loops.py does, was measured:
# no faster here, and more to compile.) A namedtuple of the row functions, looked up by a captured
# integer, keeps the closures' disk cache key the same in every process (as in loops.py).
ROWS = namedtuple("Rows", ("sequential", "pairwise"))(sequential_row, pairwise_row)


def make_matmul(order, parallel):
    """A compiled ``kernel(a, bt, out, *params)`` running ``ROWS.<order>`` on every row of ``out``.

    ``a`` and ``bt``: the tuples of unpack_matrix for A (m, k) and B transposed (n, k); ``out``: an
    (m, n) uint32 array for the output bit patterns; ``params``: the row's, for sequential and
    pairwise the accumulation and output formats' widths and the rounding-mode code
    ``(acc_ebits, acc_fbits, out_ebits, out_fbits, rounding)``. ``parallel`` spreads rows over threads (same bits).
    """
    index = ROWS._fields.index(order)
    # Read in the body, so `parallel` is part of the closure and so of Numba's cache key, which
    # ignores the decorator's options: else the serial and parallel builds would share an entry.
    rows = prange if parallel else range

    @njit(cache=True, parallel=parallel, error_model="numpy")
    def kernel(a, bt, out, *params):
        for i in rows(out.shape[0]):
            ROWS[index](a, bt, out, i, params)  # looked up in the loop: a dispatcher in a local can't be cached
    return kernel


#: (serial, row-parallel) kernel of each order; both give the same bits.
MATMUL = {order: (make_matmul(order, False), make_matmul(order, True)) for order in ROWS._fields}
matmul_sequential = MATMUL["sequential"][0]  # the reference the lane kernel is held to


# The sequential order in SIMD lanes. For inputs whose products are exact in the accumulation
# format (FP16 or BF16 into FP32: significands of at most 11 x 11 bits), A and B are first widened
# exactly to the accumulation format; then LANES neighbouring output elements (independent sums,
# one per lane) take each step together: an exact product (exact_product) and fast.add_normal,
# which LLVM vectorises. A lane that met anything these decline (a subnormal sum, inf or NaN, a
# product out of range, an overflow) is recomputed from its first term by the scalar product /
# add_round above, so the bits are always those of matmul_sequential.
LANES = 16


@njit(cache=True, forceinline=True, error_model="numpy")
def exact_product(a, b, ebits, fbits, in_fbits):
    """a * b for normal bit patterns of the format (ebits, fbits) whose significands have at most
    in_fbits + 1 significant bits (2 * in_fbits + 1 <= fbits), so that the product is exact
    -> (bits, ok); ok when it is a normal number. In uint32 lanes, like fast.add_normal."""
    drop = u32(fbits - in_fbits)
    fmask = u32((1 << fbits) - 1)
    emask = u32((1 << ebits) - 1)
    bias = u32((1 << (ebits - 1)) - 1)
    sig_a = u32(u32(u32(a & fmask) | u32(1 << fbits)) >> drop)  # the trailing zeros dropped
    sig_b = u32(u32(u32(b & fmask) | u32(1 << fbits)) >> drop)
    product = u32(sig_a * sig_b)  # leading bit at 2 * in_fbits, or one above (carry)
    carry = u32(product >> u32(2 * in_fbits + 1))
    sig = u32(product << u32(u32(fbits - 2 * in_fbits) - carry))  # leading bit at fbits: exact
    e_a = u32(u32(a >> u32(fbits)) & emask)
    e_b = u32(u32(b >> u32(fbits)) & emask)
    biased_twice = u32(u32(e_a + e_b) + carry)  # the product's exponent field, plus bias
    ok = (e_a != u32(0)) & (e_a != emask) & (e_b != u32(0)) & (e_b != emask)
    ok &= (biased_twice > bias) & (biased_twice < u32(emask + bias))
    sign = u32(u32(a ^ b) & u32(1 << (ebits + fbits)))
    return u32(sign | u32(u32(u32(biased_twice - bias) << u32(fbits)) | u32(sig & fmask))), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def mac_lane(acc, a, b, ebits, fbits, in_fbits, rounding):
    """acc + a * b for bit patterns of the accumulation format, a and b widened from a format
    with in_fbits fraction bits -> (bits, ok); ok when the bits are right."""
    sign_bit = u32(1 << (ebits + fbits))
    magnitude = u32(sign_bit - u32(1))
    inf_bits = u32(((1 << ebits) - 1) << fbits)
    acc, a, b = u32(acc), u32(a), u32(b)
    product, product_ok = exact_product(a, b, ebits, fbits, in_fbits)
    mag_a, mag_b = u32(a & magnitude), u32(b & magnitude)
    product_zero = ((mag_a == u32(0)) | (mag_b == u32(0))) & (mag_a < inf_bits) & (mag_b < inf_bits)
    product = u32(u32(a ^ b) & sign_bit) if product_zero else product
    total, _, total_ok = add_normal(acc, product, 0, ebits, fbits, rounding)
    acc_zero = u32(acc & magnitude) == u32(0)
    # Zero terms, by IEEE's rules: acc + 0 = acc, 0 + p = p, and 0 + 0 is -0 only if both are
    # (or, rounding down, if either is).
    zero_sum = u32(acc & product) if rounding != RDN else u32(acc | product)
    total = acc if product_zero else total
    total = zero_sum if product_zero and acc_zero else total
    total = product if acc_zero and not product_zero else total
    return total, product_zero | (product_ok & (acc_zero | total_ok))


@njit(cache=True, error_model="numpy")
def sequential_element(a_bits, b_bits, i, j, in_ebits, in_fbits, in_encoding, acc_ebits, acc_fbits, out_ebits,
                       out_fbits,
                       rounding):
    """C[i, j] of the sequential order by the scalar path, from bit patterns of the input format."""
    cls, sign, exp, sig = ZERO, 0, 0, 0
    for t in range(a_bits.shape[1]):
        ac, as_, ae, ag = unpack(a_bits[i, t], in_ebits, in_fbits, in_encoding, False)
        bc, bs, be, bg = unpack(b_bits[t, j], in_ebits, in_fbits, in_encoding, False)
        pc, ps, pe, pg = product(ac, as_, ae, ag, bc, bs, be, bg)
        cls, sign, exp, sig = add_round(cls, sign, exp, sig, pc, ps, pe, pg, acc_ebits, acc_fbits, rounding)
    return pack_result(cls, sign, exp, sig, out_ebits, out_fbits, rounding)


@njit(cache=True, inline="always")
def sequential_lanes_row(a_wide, b_blocks, a_bits, b_bits, out, i, in_ebits, in_fbits, in_encoding, acc_ebits,
                         acc_fbits,
                         out_ebits, out_fbits, rounding):
    """Row i of a make_sequential_lanes kernel: b_blocks holds B widened, in blocks of LANES
    columns; a_bits and b_bits are A and B in the input format, for lanes the scalar path redoes."""
    k = a_wide.shape[1]
    magnitude = (1 << (acc_ebits + acc_fbits)) - 1
    inf_bits = ((1 << acc_ebits) - 1) << acc_fbits
    acc = np.empty(LANES, np.uint32)
    ok = np.empty(LANES, np.uint8)
    for block in range(b_blocks.shape[0]):
        lanes = b_blocks[block]  # (k, LANES): this block's columns of B, row after row
        acc[:] = 0
        ok[:] = 1
        for t in range(k):
            a = a_wide[i, t]
            if a & magnitude == 0:
                # A zero term (ReLU's zeros) changes no sum, unless the sum is zero or b is inf
                # or NaN (0 * inf): skip the step if that holds for every lane.
                unchanged = 0
                for w in range(LANES):
                    unchanged += ((acc[w] & magnitude) != 0) & ((lanes[t, w] & magnitude) < inf_bits)
                if unchanged == LANES:
                    continue
            for w in range(LANES):
                total, good = mac_lane(acc[w], a, lanes[t, w], acc_ebits, acc_fbits, in_fbits, rounding)
                acc[w] = total
                ok[w] &= good
        j0 = block * LANES
        for w in range(min(LANES, out.shape[1] - j0)):
            if ok[w]:
                cls, sign, exp, sig = unpack(acc[w], acc_ebits, acc_fbits, IEEE, False)
                out[i, j0 + w] = pack_result(cls, sign, exp, sig, out_ebits, out_fbits, rounding)
            else:
                out[i, j0 + w] = sequential_element(a_bits, b_bits, i, j0 + w, in_ebits, in_fbits, in_encoding,
                                                    acc_ebits,
                                                    acc_fbits, out_ebits, out_fbits, rounding)


@njit(cache=True, inline="always")
def widen(bits, in_ebits, in_fbits, in_encoding, acc_ebits, acc_fbits):
    """A bit pattern of the input format as one of the accumulation format (exact: wider format)."""
    cls, sign, exp, sig = unpack(bits, in_ebits, in_fbits, in_encoding, False)
    return pack_result(cls, sign, exp, sig, acc_ebits, acc_fbits, 0)


def make_sequential_lanes(in_ebits, in_fbits, in_encoding, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding,
                          parallel):
    """A compiled ``kernel(a_bits, b_bits, out)``: matmul_sequential's bits for A (m, k) and B
    (k, n) in the input format (uint32 arrays), LANES output elements at a time (see LANES).

    It widens A and B to the accumulation format and cuts B into blocks of LANES columns (the last
    padded with zeros), each stored row after row so that the lanes stream it. Formats and mode
    are compile-time constants (the closure captures only integers, so the disk cache works as for
    loops.py): the lane arithmetic then has constant masks and shifts, which more than doubles its
    speed. ``parallel`` spreads rows over threads (same bits).
    """
    rows = prange if parallel else range  # in the closure, hence in the cache key: see make_matmul

    @njit(cache=True, parallel=parallel, error_model="numpy")
    def kernel(a_bits, b_bits, out):
        m, k = a_bits.shape
        n = b_bits.shape[1]
        a_wide = np.empty((m, k), np.uint32)
        for i in range(m):
            for t in range(k):
                a_wide[i, t] = widen(a_bits[i, t], in_ebits, in_fbits, in_encoding, acc_ebits, acc_fbits)
        b_blocks = np.zeros(((n + LANES - 1) // LANES, k, LANES), np.uint32)
        for t in range(k):
            for j in range(n):
                b_blocks[j // LANES, t, j % LANES] = widen(b_bits[t, j], in_ebits, in_fbits, in_encoding, acc_ebits,
                                                           acc_fbits)
        for i in rows(m):
            sequential_lanes_row(a_wide, b_blocks, a_bits, b_bits, out, i, in_ebits, in_fbits, in_encoding, acc_ebits,
                                 acc_fbits, out_ebits, out_fbits, rounding)
    return kernel
