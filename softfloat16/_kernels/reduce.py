"""Reductions: sums of terms in a named order, every addition rounded once to the accumulation format.

The terms arrive as bit patterns of a *carrier* format that holds each of them exactly; partial
sums are rounded to the accumulation format and kept in the carrier too (exact: the carrier holds
the accumulation format). Two carriers:

- the accumulation format itself (uint32 patterns), when every term is one of its values (FP16,
  BF16 or FP32 summed in FP32; FP16 products in FP32): ``Spec.fast``. Independent additions then
  run ``fast.add_normal`` side by side, branch-free, in SIMD lanes; an addition it declines
  (zeros, subnormals, inf, NaN, overflow) is redone by the general addition: the same bits;
- :data:`WIDE`, an internal IEEE layout with 10 exponent and 48 fraction bits (int64 patterns)
  holding every value, and every exact product of two values, of the formats of at most 24
  significand and 8 exponent bits: the general addition only.

The general addition is ``matmul.add_round`` (exact sum, ``core.round_pack`` once), the one the
matmul orders use. A NaN result is the default NaN (payloads are not propagated).

The orders (``softfloat16.reductions`` defines them for users):

- ``sequential``: ``((+0 + x0) + x1) + ...``: each sum a low-latency :func:`chain`, or many
  short sums side by side (:func:`sequential_lanes`);
- ``pairwise``: the binary-counter tree of ``matmul.pairwise_row``, each aligned block of
  ``PAIRWISE_BLOCK`` terms (a balanced subtree of that tree) computed level by level;
- ``blocked``: ``block`` lanes, lane l summing x[l], x[l + block], ... from +0, then a halving
  tree (lane l += lane l + offset, offset = P/2, P/4, ..., 1 for P the power of two >= block; a
  lane at or beyond ``block`` is absent);
- ``numpy``: numpy's ``pairwise_sum`` over each slice ``terms[m, o, :]``, and the slices' sums
  added in turn to a total that starts at +0 and is rounded to the output format after each
  addition, as numpy's reduction loop stores it (see :func:`numpy_block`).
"""
from collections import namedtuple

import numpy as np
from numba import njit

from .core import IEEE, round_at, unpack
from .fast import add_normal
from .matmul import add_round
from .unpacked import pack_result, product

WIDE = (10, 48)  # exponent and fraction bits of the wide carrier
LANES = 16  # results the sequential order computes side by side
PAIRWISE_BLOCK = 256  # terms of a balanced subtree the pairwise order computes level by level
NUMPY_BLOCK = 128  # numpy's PW_BLOCKSIZE
NUMPY_LANES = 8  # numpy's unrolled accumulators
_MAX_DEPTH = 64  # partial sums on a stack: enough for 2**63 terms

#: One reduction's parameters, all ints (Numba passes them by value and keys its cache on the types).
Spec = namedtuple("Spec", (
    "fast",  # 1 iff the carrier is the accumulation format (uint32 patterns)
    "carrier_ebits", "carrier_fbits", "acc_ebits", "acc_fbits", "out_ebits", "out_fbits",
    "rounding",  # core's code of the mode every addition and the final conversion use
    "block",  # the blocked order's lane count
))


@njit(cache=True, error_model="numpy")
def add_general(x, y, spec):
    """x + y for carrier patterns (int64): the exact sum rounded once to the accumulation format."""
    c_ebits, c_fbits = spec.carrier_ebits, spec.carrier_fbits
    cls_x, sign_x, exp_x, sig_x = unpack(x, c_ebits, c_fbits, IEEE, False)
    cls_y, sign_y, exp_y, sig_y = unpack(y, c_ebits, c_fbits, IEEE, False)
    cls, sign, exp, sig = add_round(cls_x, sign_x, exp_x, sig_x, cls_y, sign_y, exp_y, sig_y, spec.acc_ebits,
                                    spec.acc_fbits, spec.rounding)
    return np.int64(pack_result(cls, sign, exp, sig, c_ebits, c_fbits, spec.rounding))  # exact in the carrier


@njit(cache=True, forceinline=True, error_model="numpy")
def add(x, y, spec):
    """x + y (int64 carrier patterns) rounded to the accumulation format: add_normal when it applies."""
    if spec.fast:
        bits, _, ok = add_normal(x, y, 0, spec.acc_ebits, spec.acc_fbits, spec.rounding)
        if ok:
            return np.int64(bits)
    return add_general(x, y, spec)


@njit(cache=True, forceinline=True, error_model="numpy")
def round_to(x, ebits, fbits, spec):
    """A carrier pattern rounded to the (ebits, fbits) IEEE format: its bits there."""
    cls, sign, exp, sig = unpack(x, spec.carrier_ebits, spec.carrier_fbits, IEEE, False)
    return np.int64(pack_result(cls, sign, exp, sig, ebits, fbits, spec.rounding))


@njit(cache=True, forceinline=True, error_model="numpy")
def to_carrier(bits, ebits, fbits, encoding, c_ebits, c_fbits):
    """A pattern of the (ebits, fbits, encoding) format as a carrier pattern (exact)."""
    cls, sign, exp, sig = unpack(bits, ebits, fbits, encoding, False)
    return np.int64(pack_result(cls, sign, exp, sig, c_ebits, c_fbits, 0))


@njit(cache=True, error_model="numpy")
def add_lanes(acc, terms, start, count, fresh, spec):
    """acc[w] += terms[start + w] for w < count: independent additions, side by side when fast."""
    if spec.fast:
        bad = 0
        for w in range(count):
            bits, _, ok = add_normal(acc[w], terms[start + w], 0, spec.acc_ebits, spec.acc_fbits, spec.rounding)
            fresh[w] = bits
            bad += np.int64(not ok)
        if bad == 0:
            for w in range(count):
                acc[w] = fresh[w]
            return
    for w in range(count):
        acc[w] = add(np.int64(acc[w]), np.int64(terms[start + w]), spec)


@njit(cache=True, error_model="numpy")
def add_pairs(src, start, dst, count, spec):
    """dst[w] = src[start + 2w] + src[start + 2w + 1] for w < count: one level of a balanced tree."""
    if spec.fast:
        bad = 0
        for w in range(count):
            bits, _, ok = add_normal(src[start + 2 * w], src[start + 2 * w + 1], 0, spec.acc_ebits, spec.acc_fbits,
                                     spec.rounding)
            dst[w] = bits
            bad += np.int64(not ok)
        if bad == 0:
            return
    for w in range(count):
        dst[w] = add(np.int64(src[start + 2 * w]), np.int64(src[start + 2 * w + 1]), spec)


@njit(cache=True, error_model="numpy")
def chain(total, row, start, count, stride, spec):
    """(((total + x0) + x1) + ...) for x_i = row[start + i * stride], i < count, with ``spec.fast``
    (uint32 patterns of the accumulation format).

    A chain of dependent additions runs at add_normal's latency, not at its throughput. So while
    the sum is a normal number and each term lies in a lower binade, the sum is kept as an integer
    count S of its ulps u: adding x is exact integer arithmetic at that scale, ``(S << d) +- sig_x``
    for d the exponent difference (a term more than 31 places down jammed into one sticky bit),
    rounded by core.round_at to a multiple of u. That is the correctly rounded sum as long as the
    exact sum lies in S's binade and does not round up out of it; every other step (and any zero,
    subnormal, inf or NaN) is one add()."""
    ebits, fbits, rounding = spec.acc_ebits, spec.acc_fbits, spec.rounding
    fmask = (1 << fbits) - 1
    emask = (1 << ebits) - 1
    sign_shift = ebits + fbits
    magnitude = (1 << sign_shift) - 1
    i = 0
    while i < count:
        field = (total >> fbits) & emask
        if field != 0 and field != emask:
            sign = (total >> sign_shift) & 1
            ulps = (total & fmask) | (1 << fbits)
            while i < count:
                x = np.int64(row[start + i * stride])
                if x & magnitude == 0:  # a nonzero sum plus a zero: unchanged
                    i += 1
                    continue
                x_field = (x >> fbits) & emask
                d = field - x_field
                if x_field == 0 or x_field == emask or d < 1:
                    break
                sig = (x & fmask) | (1 << fbits)
                if d > 31:
                    d, sig = 31, 1
                exact = (ulps << d) + sig if (x >> sign_shift) & 1 == sign else (ulps << d) - sig
                if exact >> d < (1 << fbits):  # the exact sum is below the binade
                    break
                rounded, _ = round_at(exact, d, sign, rounding, 0, 32)
                if rounded >> (fbits + 1):  # rounded up into the next binade
                    break
                ulps = rounded
                i += 1
            total = (sign << sign_shift) | (field << fbits) | (ulps & fmask)
            if i == count:
                break
        total = add(total, np.int64(row[start + i * stride]), spec)
        i += 1
    return total


@njit(cache=True, error_model="numpy")
def sequential(terms, out, spec):
    """out[m] = ((+0 + terms[m, 0]) + terms[m, 1]) + ... for terms of shape (M, K): one chain a row."""
    m_total, k = terms.shape
    for m in range(m_total):
        row = terms[m]
        if spec.fast:
            total = chain(np.int64(0), row, 0, k, 1, spec)
        else:
            total = np.int64(0)
            for t in range(k):
                total = add(total, np.int64(row[t]), spec)
        out[m] = round_to(total, spec.out_ebits, spec.out_fbits, spec)


@njit(cache=True, error_model="numpy")
def sequential_lanes(terms, out, spec):
    """The sequential order for terms of shape (K, M), column m holding result m's terms: LANES
    results side by side, a step of each at a time (for many short sums, where chain's integer
    accumulation seldom gets going)."""
    k, m_total = terms.shape
    acc = np.empty(LANES, terms.dtype)
    fresh = np.empty(LANES, terms.dtype)
    for m0 in range(0, m_total, LANES):
        count = min(LANES, m_total - m0)
        acc[:] = 0
        for t in range(k):
            add_lanes(acc, terms[t], m0, count, fresh, spec)
        for w in range(count):
            out[m0 + w] = round_to(np.int64(acc[w]), spec.out_ebits, spec.out_fbits, spec)


@njit(cache=True, error_model="numpy")
def pairwise(terms, out, spec):
    """out[m] = matmul.pairwise_row's tree over terms[m, :] (shape (M, K)): term t is pushed on a
    stack of partial sums; while the two newest cover equally many terms they are replaced by their
    sum; at the end the rest are added newest first. One term alone is rounded (+0 + x); no term: +0.
    An aligned block of PAIRWISE_BLOCK terms is that tree's balanced subtree: it is summed level by level."""
    m_total, k = terms.shape
    level_a = np.empty(PAIRWISE_BLOCK // 2, terms.dtype)
    level_b = np.empty(PAIRWISE_BLOCK // 2, terms.dtype)
    stack_value = np.empty(_MAX_DEPTH, np.int64)
    stack_size = np.empty(_MAX_DEPTH, np.int64)
    for m in range(m_total):
        row = terms[m]
        depth = 0
        t = 0
        while t < k:
            if t + PAIRWISE_BLOCK <= k:
                count = PAIRWISE_BLOCK // 2
                add_pairs(row, t, level_a, count, spec)
                low, high = level_a, level_b
                while count > 1:
                    count //= 2
                    add_pairs(low, 0, high, count, spec)
                    low, high = high, low
                value = np.int64(low[0])
                size = PAIRWISE_BLOCK
                t += PAIRWISE_BLOCK
            else:
                value = np.int64(row[t])
                size = 1
                t += 1
            while depth > 0 and stack_size[depth - 1] == size:
                depth -= 1
                value = add(stack_value[depth], value, spec)
                size *= 2
            stack_value[depth] = value
            stack_size[depth] = size
            depth += 1
        total = np.int64(0)
        if depth > 0:
            depth -= 1
            total = stack_value[depth]
            if depth == 0 and stack_size[0] == 1:  # one term: +0 + x
                total = add(np.int64(0), total, spec)
            while depth > 0:
                depth -= 1
                total = add(stack_value[depth], total, spec)
        out[m] = round_to(total, spec.out_ebits, spec.out_fbits, spec)


@njit(cache=True, error_model="numpy")
def blocked(terms, out, spec):
    """out[m] = ``spec.block`` strided lanes from +0 over terms[m, :] (shape (M, K)), then the halving tree."""
    m_total, k = terms.shape
    block = spec.block
    lanes = np.empty(block, terms.dtype)
    fresh = np.empty(block, terms.dtype)
    top = 1
    while top < block:
        top *= 2
    for m in range(m_total):
        row = terms[m]
        lanes[:] = 0
        for start in range(0, k, block):
            add_lanes(lanes, row, start, min(block, k - start), fresh, spec)
        offset = top // 2
        while offset >= 1:
            for w in range(min(offset, block - offset)):
                lanes[w] = add(np.int64(lanes[w]), np.int64(lanes[w + offset]), spec)
            offset //= 2
        out[m] = round_to(np.int64(lanes[0]), spec.out_ebits, spec.out_fbits, spec)


@njit(cache=True, error_model="numpy")
def numpy_block(row, start, n, lanes, fresh, spec):
    """numpy's pairwise_sum of row[start:start + n] for n <= NUMPY_BLOCK: below 8 terms, from -0
    one by one (so that -0 terms alone sum to -0); else 8 accumulators holding the first 8 terms,
    each adding every 8th term of the rest of the largest multiple of 8, combined as
    ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the last n % 8 terms one by one."""
    whole = n - n % NUMPY_LANES
    if n < NUMPY_LANES:
        total = np.int64(1) << (spec.carrier_ebits + spec.carrier_fbits)  # -0
        whole = 0
    else:
        for w in range(NUMPY_LANES):
            lanes[w] = row[start + w]
        for i in range(start + NUMPY_LANES, start + whole, NUMPY_LANES):
            add_lanes(lanes, row, i, NUMPY_LANES, fresh, spec)
        add_pairs(lanes, 0, fresh, 4, spec)
        add_pairs(fresh, 0, lanes, 2, spec)
        add_pairs(lanes, 0, fresh, 1, spec)
        total = np.int64(fresh[0])
    for i in range(start + whole, start + n):
        total = add(total, np.int64(row[i]), spec)
    return total


@njit(cache=True, error_model="numpy")
def numpy_pairwise(row, lanes, fresh, frames, spec):
    """numpy's pairwise_sum of a whole row: above NUMPY_BLOCK terms, the first half (n // 2 less
    its remainder modulo 8) and the rest, each summed so, then added. The recursion is unrolled
    onto ``frames`` (start, length, left half's sum, whether that sum is done) rows."""
    frames[0, 0], frames[0, 1], frames[0, 3] = 0, row.shape[0], 0
    depth = 1
    value = np.int64(0)
    returning = False
    while depth > 0:
        d = depth - 1
        start, n = frames[d, 0], frames[d, 1]
        half = n // 2
        half -= half % NUMPY_LANES
        if returning:
            if frames[d, 3] == 0:  # the left half is done: now the right half
                frames[d, 2], frames[d, 3] = value, 1
                frames[depth, 0], frames[depth, 1], frames[depth, 3] = start + half, n - half, 0
                depth += 1
                returning = False
            else:
                value = add(frames[d, 2], value, spec)
                depth -= 1
        elif n <= NUMPY_BLOCK:
            value = numpy_block(row, start, n, lanes, fresh, spec)
            depth -= 1
            returning = True
        else:
            frames[depth, 0], frames[depth, 1], frames[depth, 3] = start, half, 0
            depth += 1
    return value


@njit(cache=True, error_model="numpy")
def numpy_order(terms, out, spec):
    """out[m]: total = +0, then for each o in turn total = out(acc(total + pairwise_sum(terms[m, o])))
    for terms of shape (M, O, T) (acc, out: rounding to the accumulation and output formats)."""
    lanes = np.empty(NUMPY_LANES, terms.dtype)
    fresh = np.empty(NUMPY_LANES, terms.dtype)
    frames = np.empty((_MAX_DEPTH, 4), np.int64)
    rounds_twice = spec.out_ebits != spec.acc_ebits or spec.out_fbits != spec.acc_fbits
    for m in range(terms.shape[0]):
        total = np.int64(0)
        for o in range(terms.shape[1]):
            run = terms[m, o]
            if run.shape[0] <= NUMPY_BLOCK:  # no recursion to unroll
                value = numpy_block(run, 0, run.shape[0], lanes, fresh, spec)
            else:
                value = numpy_pairwise(run, lanes, fresh, frames, spec)
            total = add(total, value, spec)
            if rounds_twice:
                bits = round_to(total, spec.out_ebits, spec.out_fbits, spec)
                total = to_carrier(bits, spec.out_ebits, spec.out_fbits, IEEE, spec.carrier_ebits,
                                   spec.carrier_fbits)
        out[m] = round_to(total, spec.out_ebits, spec.out_fbits, spec)


#: The kernels by name, each ``kernel(terms, out, spec)``; terms of shape (M, K), but (K, M) for
#: sequential_lanes (the sequential order too) and (M, O, T) for numpy.
KERNELS = {"sequential": sequential, "sequential_lanes": sequential_lanes, "pairwise": pairwise, "blocked": blocked,
           "numpy": numpy_order}


@njit(cache=True, error_model="numpy")
def widen(bits, out, ebits, fbits, encoding, c_ebits, c_fbits):
    """out[i] = bits[i], a pattern of the (ebits, fbits, encoding) format, as a carrier pattern."""
    for i in range(bits.shape[0]):
        out[i] = to_carrier(bits[i], ebits, fbits, encoding, c_ebits, c_fbits)


@njit(cache=True, error_model="numpy")
def products(a, b, out, a_ebits, a_fbits, a_encoding, b_ebits, b_fbits, b_encoding, c_ebits, c_fbits):
    """out[i] = a[i] * b[i] (patterns of two formats), exact, as a carrier pattern."""
    for i in range(a.shape[0]):
        cls_a, sign_a, exp_a, sig_a = unpack(a[i], a_ebits, a_fbits, a_encoding, False)
        cls_b, sign_b, exp_b, sig_b = unpack(b[i], b_ebits, b_fbits, b_encoding, False)
        cls, sign, exp, sig = product(cls_a, sign_a, exp_a, sig_a, cls_b, sign_b, exp_b, sig_b)
        out[i] = pack_result(cls, sign, exp, sig, c_ebits, c_fbits, 0)


@njit(cache=True, error_model="numpy")
def row_extremes(rows, nan, nan_above, signed, sign_mask, magnitude_mask, largest, chosen, first_nan):
    """For each row of ``rows`` (patterns, (m, k)): chosen[i] = its first largest (``largest``) or
    smallest non-NaN pattern by value, -0 below +0 (the row's first pattern when every one is NaN),
    and first_nan[i] = the index of its first NaN, -1 without one. The NaNs: the patterns whose
    magnitude is above ``nan_above`` (IEEE formats: infinity's pattern), or where ``nan_above`` < 0
    the mask ``nan`` (rows' shape). ``signed``: sign-magnitude patterns (``sign_mask``,
    ``magnitude_mask``), else unsigned codes. Returns whether any row holds a NaN."""
    m, k = rows.shape
    any_nan = False
    for i in range(m):
        best, best_key, found = -1, np.int64(0), -1
        for j in range(k):
            p = np.int64(rows[i, j])
            if (p & magnitude_mask) > nan_above if nan_above >= 0 else nan[i, j]:
                if found < 0:
                    found = j
                continue
            key = p
            if signed:
                key = -(p & magnitude_mask) - 1 if p & sign_mask else p & magnitude_mask
            if best < 0 or (key > best_key if largest else key < best_key):
                best, best_key = j, key
        chosen[i] = rows[i, max(best, 0)]
        first_nan[i] = found
        any_nan = any_nan or found >= 0
    return any_nan
