"""The matmul orders in SIMD lanes of float64: every order, every input format of at most 8 exponent bits.

Values of the formats of at most 24 significand and 8 exponent bits, and the exact products of two
of them (at most 48 bits, magnitudes between 2**-298 and 2**256), are all float64 normal numbers
(or zeros, infinities, NaN). So A and B are first converted to float64 (exactly), and a product is
one float64 multiplication. An addition rounded once to the accumulation format is
:func:`round_sum`: the float64 sum s and its error e (TwoSum, exact) give the exact sum to the last
bit that matters, which ``core.round_at`` (the one rounding routine) rounds.

As in matmul.make_sequential_lanes, LANES neighbouring output elements (independent sums with the
same tree of additions in k) take each step together in straight-line code, which LLVM vectorises;
B is stored in blocks of LANES columns, row after row, so the lanes stream it. A lane whose sum
meets anything :func:`round_sum` declines (a subnormal or overflowing result, inf, NaN) is
recomputed by the scalar kernel's cell function (matmul.sequential_cell, matmul.pairwise_cell), so
the bits are always the scalar kernels'.

The values, products and sums here lie between 2**-298 and 2**260 in magnitude (or are 0, inf,
NaN), so
no float64 operation of a lane that is kept underflows or overflows: the bits do not depend on the
CPU's flush-to-zero or denormals-are-zero settings. Only its rounding mode must be the default
(round to nearest even): the kernels set it on every thread (_kernels/environment.py).
"""
import math

import numpy as np
from numba import njit, prange

from .core import FINITE, INF, RDN, ZERO, round_at
from .environment import NEAREST, env_ok, swap_mxcsr
from .fast import bits_float, float_bits
from .matmul import pairwise_cell, pairwise_stacks, sequential_cell
from .unpacked import pack_result

LANES = 16  # output elements computed side by side: two AVX-512 registers of float64
_MAX_DEPTH = 64  # pairwise partial sums on the stack: enough for k < 2**63
u64 = np.uint64
_SIGN = u64(1 << 63)
_FRACTION = u64((1 << 52) - 1)


@njit(cache=True, forceinline=True, error_model="numpy")
def round_sum(x, y, acc_ebits, acc_fbits, rounding):
    """x + y rounded once to the accumulation format (acc_ebits <= 8, acc_fbits <= 23) -> (value, ok).

    x and y: float64 values, each an exact product or a value of the accumulation format. ``ok``
    when the value is right: the exact sum is zero (IEEE's signs), or rounds to a normal number.
    s = fl(x + y) and e = x + y - s (TwoSum, exact) give the exact sum: with M the 53-bit
    significand of |s|, it is 2M + 1, 2M or 2M - 1 halves of s's last place rounded to odd (e
    adds to |s|, is zero, takes from it), which rounds like the exact sum to any precision of at
    most 52 bits. When |s| is a power of two that e takes from, the sum lies in the binade below:
    2**54 - 1 there (2**54 - 2 if |e| is exactly half an ulp, which rounds the same).
    """
    s = x + y
    y_part = s - x
    e = (x - (s - y_part)) + (y - y_part)
    encoding = float_bits(s)
    sign = np.int64(encoding >> u64(63))
    field = np.int64(u64(encoding >> u64(52)) & u64(0x7FF))
    m = np.int64(encoding & _FRACTION) | np.int64(1 << 52)
    up = np.int64(e > 0.0)
    down = np.int64(e < 0.0)
    adds = up if sign == 0 else down
    takes = down if sign == 0 else up
    below = (m == np.int64(1 << 52)) & (takes == 1)  # |s| = 2**E and the sum is below it
    half_ulps = np.int64((1 << 54) - 1) if below else 2 * m + adds - takes
    field -= np.int64(below)
    q, _ = round_at(half_ulps, 53 - acc_fbits, sign, rounding, 0, 32)
    # The result's exponent field in the accumulation format; a rounding carry in q bumps it.
    acc_field = field - (1023 - ((1 << (acc_ebits - 1)) - 1))
    encoded = ((acc_field - 1) << acc_fbits) + q
    ok = (acc_field >= 1) & (encoded < (((1 << acc_ebits) - 1) << acc_fbits))  # inf and NaN s fail here too
    rounded = bits_float(u64(u64(sign) << u64(63)) | u64(((field - 1) << 52) + (q << (52 - acc_fbits))))
    # An exact zero: float64's own sign is IEEE's in every mode but rounding down, where the sum is
    # -0 if either term is negative.
    zero = s
    if rounding == RDN:
        zero = bits_float(u64(u64(float_bits(x) | float_bits(y)) & _SIGN))
    is_zero = s == 0.0
    return (zero if is_zero else rounded), ok | is_zero


@njit(cache=True, inline="always")
def unpacked_value(cls, sign, exp, sig):
    """The float64 of an unpacked value (exact for the formats taken here)."""
    if cls == FINITE:
        value = math.ldexp(float(sig), int(exp))
    elif cls == ZERO:
        value = 0.0
    elif cls == INF:
        value = math.inf
    else:
        value = math.nan
    return -value if sign else value


@njit(cache=True, inline="always")
def value_bits(value, out_ebits, out_fbits, rounding):
    """Bits of a float64 holding zero or a normal value of the accumulation format, rounded to the
    output format (the one final rounding)."""
    encoding = float_bits(value)
    sign = np.int64(encoding >> u64(63))
    field = np.int64(u64(encoding >> u64(52)) & u64(0x7FF))
    if field == 0:
        return pack_result(ZERO, sign, 0, 0, out_ebits, out_fbits, rounding)
    sig = np.int64(encoding & _FRACTION) | np.int64(1 << 52)
    return pack_result(FINITE, sign, field - 1075, sig, out_ebits, out_fbits, rounding)


@njit(cache=True, inline="always")
def lane_operands(a, bt):
    """A as float64 (m, k) and B as float64 blocks of LANES columns (blocks, k, LANES), padded with
    zeros, from the unpacked A and B transposed (matmul.unpack_matrix)."""
    cls_a, sign_a, exp_a, sig_a = a
    cls_b, sign_b, exp_b, sig_b = bt
    m, k = cls_a.shape
    n = cls_b.shape[0]
    a_values = np.empty((m, k), np.float64)
    for i in range(m):
        for t in range(k):
            a_values[i, t] = unpacked_value(cls_a[i, t], sign_a[i, t], exp_a[i, t], sig_a[i, t])
    b_blocks = np.zeros(((n + LANES - 1) // LANES, k, LANES), np.float64)
    for j in range(n):
        for t in range(k):
            b_blocks[j // LANES, t, j % LANES] = unpacked_value(cls_b[j, t], sign_b[j, t], exp_b[j, t], sig_b[j, t])
    return a_values, b_blocks


@njit(cache=True, inline="always")
def sequential_lanes_row(a_values, b_blocks, a, bt, out, i, params):
    """Row i of the sequential order: acc = round(acc + a[i, t] * b[t, j]), t ascending, from +0.
    Returns how many of the row's elements the scalar path recomputed (as do the other rows)."""
    acc_ebits, acc_fbits, out_ebits, out_fbits, rounding = params
    k = a_values.shape[1]
    acc = np.empty(LANES, np.float64)
    ok = np.empty(LANES, np.bool_)
    redone = 0
    for block in range(b_blocks.shape[0]):
        lanes = b_blocks[block]
        acc[:] = 0.0
        ok[:] = True
        for t in range(k):
            x = a_values[i, t]
            if x == 0.0:
                # A zero term (ReLU's zeros) changes no nonzero sum, unless b is inf or NaN
                # (0 * inf): skip the step if that holds for every lane.
                unchanged = 0
                for w in range(LANES):
                    unchanged += (acc[w] != 0.0) & (abs(lanes[t, w]) < math.inf)
                if unchanged == LANES:
                    continue
            for w in range(LANES):
                total, good = round_sum(acc[w], x * lanes[t, w], acc_ebits, acc_fbits, rounding)
                acc[w] = total
                ok[w] &= good
        j0 = block * LANES
        for w in range(min(LANES, out.shape[1] - j0)):
            if ok[w]:
                out[i, j0 + w] = value_bits(acc[w], out_ebits, out_fbits, rounding)
            else:
                out[i, j0 + w] = sequential_cell(a, bt, i, j0 + w, params)
                redone += 1
    return redone


@njit(cache=True, inline="always")
def pairwise_lanes_row(a_values, b_blocks, a, bt, out, i, params, stack, sizes, scalar_stacks):
    """Row i of the pairwise order: matmul.pairwise_row's tree, whose shape depends on k alone, so
    every lane takes the same steps. ``stack`` (_MAX_DEPTH, LANES) and ``sizes`` are scratch."""
    acc_ebits, acc_fbits, out_ebits, out_fbits, rounding = params
    k = a_values.shape[1]
    p = np.empty(LANES, np.float64)
    ok = np.empty(LANES, np.bool_)
    redone = 0
    for block in range(b_blocks.shape[0]):
        lanes = b_blocks[block]
        ok[:] = True
        depth = 0
        for t in range(k):
            x = a_values[i, t]
            for w in range(LANES):
                p[w] = x * lanes[t, w]  # exact
            size = 1
            while depth > 0 and sizes[depth - 1] == size:
                depth -= 1
                for w in range(LANES):
                    total, good = round_sum(stack[depth, w], p[w], acc_ebits, acc_fbits, rounding)
                    p[w] = total
                    ok[w] &= good
                size *= 2
            stack[depth, :] = p
            sizes[depth] = size
            depth += 1
        if depth == 0:
            p[:] = 0.0
        else:
            depth -= 1
            p[:] = stack[depth]
            if depth == 0 and sizes[0] == 1:  # k == 1: round the lone product (+0 + p)
                for w in range(LANES):
                    total, good = round_sum(0.0, p[w], acc_ebits, acc_fbits, rounding)
                    p[w] = total
                    ok[w] &= good
            while depth > 0:
                depth -= 1
                for w in range(LANES):
                    total, good = round_sum(stack[depth, w], p[w], acc_ebits, acc_fbits, rounding)
                    p[w] = total
                    ok[w] &= good
        j0 = block * LANES
        for w in range(min(LANES, out.shape[1] - j0)):
            if ok[w]:
                out[i, j0 + w] = value_bits(p[w], out_ebits, out_fbits, rounding)
            else:
                out[i, j0 + w] = pairwise_cell(a, bt, i, j0 + w, params, scalar_stacks)
                redone += 1
    return redone


# The two kernels. The accumulation format is a compile-time constant, as in
# matmul.make_sequential_lanes (constant masks and shifts are what make the lanes fast), and so is
# the rounding mode when the caller names one: RNE, the one nearly every call uses, is 20-40%
# faster compiled in; the other modes share one build (ANY_ROUNDING) taking the mode as an
# argument, which keeps the builds few (each takes seconds to compile). The closures capture only
# integers, so Numba's disk cache keeps them. The output format is a run-time value: it acts once
# per element.
ANY_ROUNDING = -1


def make_sequential_lanes(acc_ebits, acc_fbits, rounding, parallel):
    """A compiled ``kernel(a, bt, out, out_ebits, out_fbits, mode, probe)``: matmul.matmul_sequential's bits
    for the unpacked A (m, k) and B transposed (n, k) (matmul.unpack_matrix), into the (m, n)
    uint32 ``out``. ``rounding``: the mode code compiled in (then ``mode`` must be the same), or
    ANY_ROUNDING to take ``mode``. ``parallel`` spreads rows over threads (same bits). Each row
    sets its thread's floating-point environment to the default and restores it (a thread of
    Numba's may hold another one: it started with its creator's). Returns (how many elements the
    scalar path recomputed, what the tests and benchmarks watch; whether every row had the default
    environment, ``probe`` environment.PROBE: where not, ``out`` is meaningless)."""
    rows = prange if parallel else range  # in the closure, hence in the cache key: see matmul.make_matmul

    @njit(cache=True, parallel=parallel, error_model="numpy")
    def kernel(a, bt, out, out_ebits, out_fbits, mode, probe):
        if rounding != ANY_ROUNDING:
            mode = rounding  # a constant the compiler folds into the lanes
        a_values, b_blocks = lane_operands(a, bt)
        redone = 0
        params = (acc_ebits, acc_fbits, out_ebits, out_fbits, mode)
        good = np.ones(out.shape[0], np.bool_)
        for i in rows(out.shape[0]):
            saved = swap_mxcsr(NEAREST)
            good[i] = env_ok(probe)
            redone += sequential_lanes_row(a_values, b_blocks, a, bt, out, i, params)
            if saved >= 0:
                swap_mxcsr(saved)
        return redone, good.all()
    return kernel


def make_pairwise_lanes(acc_ebits, acc_fbits, rounding, parallel):
    """A compiled ``kernel(a, bt, out, out_ebits, out_fbits, mode, probe)``: matmul.MATMUL["pairwise"]'s
    bits, arguments as for make_sequential_lanes."""
    rows = prange if parallel else range

    @njit(cache=True, parallel=parallel, error_model="numpy")
    def kernel(a, bt, out, out_ebits, out_fbits, mode, probe):
        if rounding != ANY_ROUNDING:
            mode = rounding
        a_values, b_blocks = lane_operands(a, bt)
        redone = 0
        params = (acc_ebits, acc_fbits, out_ebits, out_fbits, mode)
        good = np.ones(out.shape[0], np.bool_)
        for i in rows(out.shape[0]):
            saved = swap_mxcsr(NEAREST)
            good[i] = env_ok(probe)
            stack = np.empty((_MAX_DEPTH, LANES), np.float64)  # per row: rows may run on other threads
            sizes = np.empty(_MAX_DEPTH, np.int64)
            redone += pairwise_lanes_row(a_values, b_blocks, a, bt, out, i, params, stack, sizes, pairwise_stacks())
            if saved >= 0:
                swap_mxcsr(saved)
        return redone, good.all()
    return kernel
