"""The aligning adders' GEMM in lanes (softfloat16._kernels.mma_lanes) from the operands' patterns:
:func:`gemm` reads A (M, K) and B (K, N) once into lanes (:func:`prepare_rows`, B cut into tiles of
LANES columns by :func:`prepare_tiles`: the float64 value, the int16 alignment exponent, per-step
flags of zeros and of NaN or infinities, and the span of exponents and significands that
:func:`lanes_fit` checks), then runs mma_lanes.lanes_gemm, or the scalar kernel where the lanes
would not be exact. The decoded operands the scalar kernel reads are made only where a scalar step
may run."""
import numpy as np
from numba import njit, prange

from .core import FINITE, IEEE, INF, NAN, NAN_AT_NEGATIVE_ZERO, NO_SUBNORMALS, SIGNED, ZERO, bias_of
from .core import max_finite_bits
from .environment import PROBE
from .mma import ADD_C_APART, ADD_C_APART_SPLIT, ADD_GROUPS, ADD_TRUNCATED, OUT_RNE_FP16, decode_one
from .mma import mma_gemm as scalar_gemm
from .mma_lanes import E_BOUND, LANE_ADDERS, LANES, NONE, decoded_value, lanes_gemm, narrow_fit, pow2


@njit(cache=True, forceinline=True, error_model="numpy")
def _operand(bits, fmt, s, i, t, block, fold):
    """One operand of lanes from its pattern: (value, alignment exponent, class, the pattern's own
    class, e, q, m, whether its block scale is a NaN or infinity). With ``fold`` its scale
    s[.][i, t // block] is folded in (a zero scale makes a zero factor)."""
    cls, sign, e, q, m = decode_one(bits, fmt)
    value = decoded_value(sign, q, m)
    c, ee, scale_special = cls, e, False
    if block > 0:
        g = t // block
        cs = s[0][i, g]
        if cs == NAN or cs == INF:
            scale_special = True
        elif fold:
            if cs == ZERO:
                c = ZERO if c == FINITE else c
            else:
                value *= decoded_value(s[1][i, g], s[3][i, g], s[4][i, g])
                ee += s[2][i, g]
    return value, ee, c, cls, e, q, m, scale_special


@njit(cache=True, forceinline=True, error_model="numpy")
def _lane_operands(bits, fmt, s, i, j0, nw, block, fold, values, exps, kinds):
    """values, exps and kinds (bit 0: a zero factor, bit 1: a NaN or infinity, the pattern or its
    scale) of the operands bits[t, j0 + w] (w < nw) from their patterns, and their span (largest e,
    smallest q, largest m, count of finite patterns). Inlined where ``block`` and ``fold`` are
    constants: with them (and the step length) left to run time the loop takes 4 to 10 times longer."""
    e_hi, q_lo, m_hi, count = -(1 << 30), 1 << 30, 0, 0
    for t in range(bits.shape[0]):
        for w in range(nw):
            value, ee, c, cls, e, q, m, scale_special = _operand(bits[t, j0 + w], fmt, s, i + w, t, block, fold)
            if cls == FINITE:
                e_hi, q_lo, m_hi, count = max(e_hi, e), min(q_lo, q), max(m_hi, m), count + 1
            finite = c == FINITE
            values[t, w] = value if finite else 0.0
            exps[t, w] = np.int16(ee) if finite else NONE  # in int16 where lanes_fit holds
            kinds[t, w] = np.int8(c == ZERO) | (np.int8(scale_special or c == NAN or c == INF) << 1)
    return e_hi, q_lo, m_hi, count


@njit(cache=True, forceinline=True, error_model="numpy")
def _lane_fields(bits, fmt, j0, nw, values, exps, kinds):
    """_lane_operands of unscaled operands of a :func:`plain` format, from the pattern's fields
    without a branch (vectorised; decode_one's branches on the class cost 3 to 5 ns per operand):
    a NaN or infinity is a magnitude above the largest finite one, a subnormal's exponent the
    format's minimum."""
    ebits, fbits, encoding, shift, mask = fmt
    bias = bias_of(ebits, encoding)
    top = (1 << (ebits + fbits)) - 1
    largest = max_finite_bits(0, ebits, fbits, encoding)
    e_hi, q_lo, m_hi, count = -(1 << 30), 1 << 30, 0, 0
    for t in range(bits.shape[0]):
        for w in range(nw):
            pattern = np.int64(bits[t, j0 + w]) & mask
            magnitude = pattern & top
            field = magnitude >> fbits
            m = (magnitude & ((1 << fbits) - 1)) | (np.int64(field > 0) << fbits)
            q = max(field, 1) - bias - fbits
            finite = (magnitude <= largest) & (magnitude != 0)
            v = np.float64(m) * pow2(q)
            values[t, w] = (-v if pattern > top else v) if finite else 0.0
            exps[t, w] = np.int16(q + fbits) if finite else NONE
            kinds[t, w] = np.int8(magnitude == 0) | (np.int8(magnitude > largest) << 1)
            e_hi, q_lo = max(e_hi, q + fbits if finite else -(1 << 30)), min(q_lo, q if finite else 1 << 30)
            m_hi, count = max(m_hi, m if finite else 0), count + np.int64(finite)
    return e_hi, q_lo, m_hi, count


def plain(fmt: tuple) -> bool:
    """Whether :func:`_lane_fields` reads the kernel format ``fmt``: signed, with subnormals and a
    zero of each sign, its NaNs and infinities (if any) the magnitudes above the largest finite one
    (IEEE 754's formats, E4M3FN, the FP6 and FP4 formats), not held shifted."""
    ebits, fbits, encoding, shift, mask = fmt
    return bool(encoding & SIGNED) and not encoding & (NAN_AT_NEGATIVE_ZERO | NO_SUBNORMALS) and shift == 0 and (
        mask == (1 << (ebits + fbits + 1)) - 1)


@njit(cache=True, forceinline=True, error_model="numpy")
def _lane_pass(bits, fmt, s, i, j0, nw, block, fold, fields, values, exps, kinds):
    """_lane_operands with ``block`` and ``fold`` as constants: unscaled (``fields``: from the
    fields, _lane_fields), and the block-scaled presets' blocks of 16 and 32 (folded or not)."""
    if fields:
        return _lane_fields(bits, fmt, j0, nw, values, exps, kinds)
    if block == 0:
        return _lane_operands(bits, fmt, s, i, j0, nw, 0, False, values, exps, kinds)
    if block == 32:
        if fold:
            return _lane_operands(bits, fmt, s, i, j0, nw, 32, True, values, exps, kinds)
        return _lane_operands(bits, fmt, s, i, j0, nw, 32, False, values, exps, kinds)
    if block == 16:
        if fold:
            return _lane_operands(bits, fmt, s, i, j0, nw, 16, True, values, exps, kinds)
        return _lane_operands(bits, fmt, s, i, j0, nw, 16, False, values, exps, kinds)
    return _lane_operands(bits, fmt, s, i, j0, nw, block, fold, values, exps, kinds)


@njit(cache=True, error_model="numpy")
def prepare_rows(bits, fmt, s, length, block, fold, fields, values, exps, zero, special, span):
    """A's lanes from its patterns ``bits`` (M, K) of format ``fmt`` and decoded scales ``s`` (M,
    K // block; ``block`` 0 when unscaled): ``values`` and ``exps`` (M, K) the float64 value and
    int16 alignment exponent (NONE for a zero, NaN or inf); ``zero`` and ``special`` (M, K // length):
    whether a step has a zero factor, a NaN or an infinity (a NaN or infinite scale is flagged, folded
    or not); ``span`` (M, 4): each row's (largest e, smallest q, largest m, count) of its finite
    patterns (for lanes_fit). One pass over the patterns, nothing decoded kept, on one thread (as
    mma.decode: the pass is cheap next to the GEMM, and starting threads costs more on small ones);
    ``fields``: unscaled operands of a :func:`plain` format, read by _lane_fields."""
    k = bits.shape[1]
    for i in range(bits.shape[0]):
        kinds = np.empty((k, 1), np.int8)
        row = bits[i].reshape((k, 1))
        span[i, 0], span[i, 1], span[i, 2], span[i, 3] = _lane_pass(row, fmt, s, i, 0, 1, block, fold, fields,
                                                                    values[i].reshape((k, 1)),
                                                                    exps[i].reshape((k, 1)), kinds)
        for step in range(k // length):
            flags = np.int8(0)
            for t in range(step * length, (step + 1) * length):
                flags |= kinds[t, 0]
            zero[i, step] = flags & 1
            special[i, step] = flags >> 1


CHUNK = 16  # rows of B that prepare_tiles reads across its tiles at a time (from a plain format)


@njit(cache=True, error_model="numpy")
def prepare_tiles(bits, fmt, s, length, block, fold, fields, values, exps, zero, special, tile_special, span):
    """B's lanes from its patterns ``bits`` (K, N), cut into tiles of LANES columns (the last padded
    with zeros at NONE): ``values``, ``exps`` (N / LANES, K, LANES), ``zero``, ``special`` (N / LANES,
    steps, LANES), ``tile_special`` (N / LANES, steps): whether a lane of the tile has a special step,
    ``span`` (N / LANES, 4) per tile; ``s``: B's decoded scales, (N, K // block). As prepare_rows."""
    k, cols = bits.shape
    tiles = values.shape[0]
    every = np.zeros((tiles, k, LANES), np.int8)
    if fields:  # CHUNK rows of B at a time, across the tiles: each row read once, from the cache
        for tile in range(tiles):
            span[tile, 0], span[tile, 1], span[tile, 2], span[tile, 3] = -(1 << 30), 1 << 30, 0, 0
        for t0 in range(0, k, CHUNK):
            t1 = min(k, t0 + CHUNK)
            for tile in range(tiles):
                j0 = tile * LANES
                e_hi, q_lo, m_hi, count = _lane_fields(bits[t0:t1], fmt, j0, min(LANES, cols - j0),
                                                       values[tile, t0:t1], exps[tile, t0:t1], every[tile, t0:t1])
                span[tile, 0], span[tile, 1] = max(span[tile, 0], e_hi), min(span[tile, 1], q_lo)
                span[tile, 2], span[tile, 3] = max(span[tile, 2], m_hi), span[tile, 3] + count
    for tile in range(tiles):
        j0 = tile * LANES
        nw = min(LANES, cols - j0)
        kinds = every[tile]
        if not fields:
            span[tile, 0], span[tile, 1], span[tile, 2], span[tile, 3] = _lane_pass(bits, fmt, s, j0, j0, nw, block,
                                                                                    fold, False, values[tile],
                                                                                    exps[tile], kinds)
        for t in range(k):
            for w in range(nw, LANES):
                values[tile, t, w] = 0.0
                exps[tile, t, w] = NONE
        flags = np.empty(LANES, np.int8)
        for step in range(k // length):
            flags[:] = 0
            for t in range(step * length, (step + 1) * length):
                for w in range(LANES):
                    flags[w] |= kinds[t, w]
            any_special = False
            for w in range(LANES):
                zero[tile, step, w] = flags[w] & 1
                special[tile, step, w] = flags[w] >> 1
                any_special |= flags[w] > 1
            tile_special[tile, step] = any_special


@njit(cache=True, error_model="numpy")
def any_special(bits, fmt):
    """Whether any pattern of ``bits`` (2-D) is a NaN or an infinity."""
    for i in range(bits.shape[0]):
        for j in range(bits.shape[1]):
            cls = decode_one(bits[i, j], fmt)[0]
            if cls == NAN or cls == INF:
                return True
    return False


@njit(cache=True, parallel=True, error_model="numpy")
def prepare_scales(s, values, exps, zero):
    """A group adder's scales: value, alignment exponent and whether zero (NaN and inf: flagged by
    :func:`prepare`, their lanes meaningless)."""
    cls, sign, e, q, m = s
    for i in prange(cls.shape[0]):
        for g in range(cls.shape[1]):
            finite = cls[i, g] == FINITE
            values[i, g] = decoded_value(sign[i, g], q[i, g], m[i, g]) if finite else 0.0
            exps[i, g] = e[i, g] if finite else NONE
            zero[i, g] = not finite


def _span(span) -> tuple[int, int, int]:
    """(largest e, smallest q, largest m) over the rows of prepare_rows' / prepare_tiles' ``span``
    (0, 0, 0 if no pattern is finite)."""
    seen = span[:, 3] > 0
    if not seen.any():
        return 0, 0, 0
    return int(span[seen, 0].max()), int(span[seen, 1].min()), int(span[seen, 2].max())


def _scale_span(x) -> tuple[int, int, int]:
    """(largest e, smallest q, largest m) of decoded scales' finite values (0, 0, 0 if none)."""
    finite = x[0] == FINITE
    if not finite.any():
        return 0, 0, 0
    return int(x[2][finite].max()), int(x[3][finite].min()), int(x[4][finite].max())


def lanes_fit(span_a, span_b, sa, sb, params) -> bool:
    """Whether the float64 lanes are exact for operands of these spans (:func:`_span`) and decoded
    scales: every product (its scales folded
    in) of at most 53 significand bits and between 2**-900 and 2**900, a step's terms (below
    2**(F + 2) each) summing exactly, and a group's exact sum of ``group`` products within 53 bits."""
    adder, length, frac_bits, e_zero, out_kind, group, block, scaled, frac_bits2 = params
    if adder not in LANE_ADDERS or (length + 1) << (frac_bits + 2) > 1 << 53 or frac_bits2 > 48:
        return False
    if adder in (ADD_TRUNCATED, ADD_GROUPS) and abs(e_zero) > 200:
        return False
    ea, qa, ma = span_a
    eb, qb, mb = span_b
    es = qs = 0
    ms = 1
    if scaled:
        (esa, qsa, msa), (esb, qsb, msb) = _scale_span(sa), _scale_span(sb)
        es, qs, ms = max(esa, 0) + max(esb, 0), min(qsa, 0) + min(qsb, 0), max(msa, 1) * max(msb, 1)
    if ea + eb + es > 900 or qa + qb + qs < -900 or ma * mb * ms >= 1 << 53:
        return False
    if max(ea, eb) + es > E_BOUND or min(qa, qb) + qs < -E_BOUND:  # an e beyond int16's sums
        return False
    # A group's sum: products between 2**(qa + qb) and 2**(ea + eb + 2), group of them.
    return adder != ADD_GROUPS or (ea + eb + 2) - (qa + qb) + group.bit_length() <= 53


def _tiles(x):
    """(columns, n) -> (columns / LANES, n, LANES), contiguous: B's tiles, one after another."""
    return np.ascontiguousarray(x.reshape(-1, LANES, x.shape[1]).transpose(0, 2, 1))


def gemm(a_bits, b_bits, a_fmt, b_fmt, decoded, c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params) -> None:
    """mma.mma_gemm's D into ``out`` from the patterns ``a_bits`` (M, K) and ``b_bits`` (K, N) (uint16 or int64)
    of formats ``a_fmt`` and ``b_fmt`` (mma.decode's layouts): the adders of LANE_ADDERS in lanes
    where lanes_fit, everything else on the scalar kernel (same bits). ``decoded()`` returns the
    decoded (A, B.T) that the scalar kernel reads; it is called only where a scalar step may run
    (an AMD adder, a NaN or infinity among the operands, scales or C) or lanes do not fit. The
    other arguments are mma.mma_gemm's."""
    adder, length, block, scaled = params[0], params[1], params[6], params[7]
    d_format = (5, 10, IEEE, 0) if params[4] == OUT_RNE_FP16 else (8, 23, IEEE, 0)  # what round_out writes
    if tuple(d_fmt[:4]) != d_format or adder not in LANE_ADDERS:
        scalar_gemm(*decoded(), c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params)
        return
    rows, k = a_bits.shape
    cols = b_bits.shape[1]
    steps = k // length
    tiles = -(-cols // LANES)
    fold = adder == ADD_TRUNCATED and scaled
    scale_block = block if scaled else 0
    fields_a, fields_b = not scaled and plain(tuple(a_fmt)), not scaled and plain(tuple(b_fmt))

    def prepared(dtype):  # (binary32 values from uint16 patterns, binary64 ones from int64: two compiled kinds)
        a_in, b_in = (a_bits, b_bits) if dtype == np.float32 else (a_bits.astype(np.int64, copy=False),
                                                                   b_bits.astype(np.int64, copy=False))
        lanes_a = (np.empty((rows, k), dtype), np.empty((rows, k), np.int16), np.empty((rows, steps), np.bool_),
                   np.empty((rows, steps), np.bool_))
        span_a = np.empty((rows, 4), np.int64)
        prepare_rows(a_in, a_fmt, sa, length, scale_block, fold, fields_a, *lanes_a, span_a)
        lanes_b = (np.empty((tiles, k, LANES), dtype), np.empty((tiles, k, LANES), np.int16),
                   np.empty((tiles, steps, LANES), np.bool_), np.empty((tiles, steps, LANES), np.bool_),
                   np.empty((tiles, steps), np.bool_))
        span_b = np.empty((tiles, 4), np.int64)
        prepare_tiles(b_in, b_fmt, sb, length, scale_block, fold, fields_b, *lanes_b, span_b)
        return lanes_a, lanes_b, _span(span_a), _span(span_b)

    # Values in binary32 arrays where the terms may take binary32 lanes: every value of both formats
    # is a binary32 value (at most 16 bits, 8 exponent bits), and the operands' spans fit narrow_fit
    # (which no binary32 subnormal does: then the values are read again into binary64 arrays).
    narrow = adder == ADD_TRUNCATED and fields_a and fields_b and max(a_fmt[0] + a_fmt[1], b_fmt[0] + b_fmt[1]) < 16 \
        and max(a_fmt[0], b_fmt[0]) <= 8
    lanes_a, lanes_b, span_a, span_b = prepared(np.float32 if narrow else np.float64)
    if narrow and not narrow_fit(span_a, span_b, params, scaled):
        narrow = False
        lanes_a, lanes_b, span_a, span_b = prepared(np.float64)
    if not lanes_fit(span_a, span_b, sa, sb, params):
        scalar_gemm(*decoded(), c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params)
        return
    # Both value arrays, one a stand-in: one compiled lanes_gemm for binary32 and binary64 values.
    stand_in_a, stand_in_b = np.zeros((1, 1), np.float64 if narrow else np.float32), np.zeros(
        (1, 1, 1), np.float64 if narrow else np.float32)
    lanes_a = ((stand_in_a, lanes_a[0]) if narrow else (lanes_a[0], stand_in_a)) + lanes_a[1:]
    lanes_b = ((stand_in_b, lanes_b[0]) if narrow else (lanes_b[0], stand_in_b)) + lanes_b[1:]
    groups = adder == ADD_GROUPS
    blocks = k // block if groups else 1
    padded = tiles * LANES
    scales_a = (np.zeros((rows, blocks)), np.zeros((rows, blocks), np.int32), np.ones((rows, blocks), np.bool_))
    scales_b = (np.zeros((padded, blocks)), np.zeros((padded, blocks), np.int32), np.ones((padded, blocks), np.bool_))
    if groups:
        prepare_scales(sa, *scales_a)
        prepare_scales(sb, *(x[:cols] for x in scales_b))
    scales_b = tuple(_tiles(x) for x in scales_b)
    amd = adder in (ADD_C_APART, ADD_C_APART_SPLIT)  # its lanes may take scalar steps after an overflow
    if amd or lanes_a[4].any() or lanes_b[5].any() or (has_c and any_special(c_bits, c_fmt)):
        a, b = decoded()
    else:  # no step takes the scalar kernel's: it reads nothing of these
        a = b = decode_nothing()
    if not lanes_gemm(a, b, c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params, lanes_a, lanes_b, scales_a, scales_b,
                      narrow, PROBE):  # the floating-point environment is not the default (off x86: not set)
        scalar_gemm(*decoded(), c_bits, has_c, c_fmt, d_fmt, sa, sb, out, params)


def decode_nothing() -> tuple:
    """Decoded operands of the right types that no scalar step reads (one +0)."""
    return (np.full((1, 1), ZERO, np.int8), np.zeros((1, 1), np.int8), np.zeros((1, 1), np.int64),
            np.zeros((1, 1), np.int64), np.zeros((1, 1), np.int64))
