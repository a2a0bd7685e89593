"""Block-scaled formats (OCP MX, NVFP4): quantisation and the block-scaled matmul, as Numba kernels.

docs/mx.md defines every step; softfloat16/mx.py validates arguments and calls these. Every value
is rounded by ``core.round_pack``, the project's one rounding routine: an MX element is x / 2**shared
(exact: a shift of x's exponent) rounded once; the FP32 steps of the NVFP4 recipe and of the matmul
are exact products, quotients and sums (with a jammed sticky bit where they do not fit) rounded once.

The quantisers work on a 2-D array of source bit patterns ``(rows, n)`` whose last axis is the
blocked one. The source format's widths and encoding and the element format are compile-time
constants of each compiled quantiser (a closure over integers, as in loops.py: Numba caches it on
disk keyed by those integers). So are, in the configuration where speed matters, the rounding mode
when it is round-to-nearest-even (``FIXED_RNE``) and the block size when it is the format's
default (a loop of known trip count vectorises: 0.1 instead of 1 ns per element for the amax
pass); otherwise both are read at run time (``RUNTIME_ROUNDING``, ``RUNTIME_BLOCK_SIZE``), as is
the scale rule, which saves compiling a quantiser per mode and per block size.
"""
from numba import njit

from .core import FINITE, FINITE_ONLY, FN, IEEE, INF, NAN, RNE, ZERO, msb_index, round_pack, shift_right_jam, unpack

FLOOR, RCEIL = 0, 1  # MX scale rules (docs/mx.md)
FIXED_RNE, RUNTIME_ROUNDING = RNE, -1  # the ``rounding`` a quantiser is built with
RUNTIME_BLOCK_SIZE = 0  # the ``block_size`` of a quantiser that reads it at run time
SCALE_EXP_MIN, SCALE_EXP_MAX = -127, 127  # E8M0's range of powers of two
E8M0_BIAS, E8M0_NAN = 127, 0xFF
# MXINT8's grid k/64 as a format: 1 exponent bit, 7 fraction bits, bias 0, every pattern finite.
# Its emin is 1, so everything below 2 is subnormal with spacing 2**-6 and [2, 4) has the same
# spacing: round_pack into it rounds to a multiple of 1/64, magnitude k = the pattern (up to 255).
INT8_EXPONENT_BITS, INT8_FRACTION_BITS = 1, 7
FP32_EBITS, FP32_FBITS = 8, 23
FP32_MAX_BITS, FP32_NAN_BITS = 0x7F7FFFFF, 0x7FC00000
E4M3_EBITS, E4M3_FBITS, E4M3_NAN = 4, 3, 0x7F
E2M1_EBITS, E2M1_FBITS = 2, 1


@njit(cache=True, forceinline=True, error_model="numpy")
def multiply_jam(a, b):
    """(sig, shift) with sig * 2**shift = a * b, sig < 2**62 exact or with a jammed sticky bit 0,
    for 0 < a < 2**62 and 0 < b < 2**25 (a float64 significand times an FP32 one has 77 bits)."""
    if a < (1 << 37):
        return a * b, 0
    low_bits = msb_index(a) - 36  # a = high * 2**low_bits + low, high < 2**37
    high = a >> low_bits
    low_product = (a & ((1 << low_bits) - 1)) * b  # < 2**(low_bits + 25) <= 2**50
    top = high * b + (low_product >> low_bits)  # < 2**62 - 2**37 + 2**25: fits
    sticky = int((low_product & ((1 << low_bits) - 1)) != 0)
    return top | sticky, low_bits  # top has >= 60 bits: bit 0 lies far below any rounding point


@njit(cache=True, forceinline=True, error_model="numpy")
def fp32_round(sign, exp, sig, saturate):
    """FP32 bits of (-1)**sign * sig * 2**exp rounded to nearest even (sig > 0; ``saturate``: an
    overflow gives the largest finite value instead of inf, as CUDA's fminf(x, FLT_MAX) does)."""
    return round_pack(sign, exp, sig, FP32_EBITS, FP32_FBITS, IEEE, RNE, 0, 0, saturate, 0, 32)[0]


@njit(cache=True, forceinline=True, error_model="numpy")
def fp32_reciprocal(bits):
    """FP32 1/x rounded to nearest even for a positive finite FP32 x; an overflow (x below 2**-128)
    saturates to the largest finite value (CUDA's fminf(1.0f / x, FLT_MAX))."""
    _, _, exp, sig = unpack(bits, FP32_EBITS, FP32_FBITS, IEEE, 0)
    quotient = (1 << 61) // sig  # >= 2**37 since sig < 2**24
    sticky = int(quotient * sig != (1 << 61))
    return fp32_round(0, -61 - exp, quotient | sticky, 1)


@njit(cache=True, forceinline=True, error_model="numpy")
def fp32_add(x, y):
    """FP32 x + y rounded to nearest even (IEEE zeros and infinities; a NaN result is 0x7FC00000)."""
    cls_x, sign_x, exp_x, sig_x = unpack(x, FP32_EBITS, FP32_FBITS, IEEE, 0)
    cls_y, sign_y, exp_y, sig_y = unpack(y, FP32_EBITS, FP32_FBITS, IEEE, 0)
    if cls_x == NAN or cls_y == NAN:
        return FP32_NAN_BITS
    if cls_x == INF or cls_y == INF:
        if cls_x == INF and cls_y == INF and sign_x != sign_y:
            return FP32_NAN_BITS
        return x if cls_x == INF else y
    if cls_y == ZERO:
        if cls_x == ZERO and sign_x != sign_y:
            return 0  # +0 + -0 = +0 when rounding to nearest
        return x
    if cls_x == ZERO:
        return y
    # Align both on the lower exponent when they are close (exact, below 2**61); otherwise the
    # smaller one lies wholly below the larger one's 37 guard bits and is jammed there.
    if exp_x < exp_y:
        sign_x, exp_x, sig_x, sign_y, exp_y, sig_y = sign_y, exp_y, sig_y, sign_x, exp_x, sig_x
    gap = exp_x - exp_y
    if gap <= 36:
        big, small, exp = sig_x << gap, sig_y, exp_y
    else:
        big, small, exp = sig_x << 36, shift_right_jam(sig_y, gap - 36), exp_x - 36
    total = (-big if sign_x else big) + (-small if sign_y else small)
    if total == 0:
        return 0  # an exact zero sum of opposite terms is +0 when rounding to nearest
    return fp32_round(int(total < 0), exp, abs(total), 0)


@njit(cache=True, forceinline=True, error_model="numpy")
def fp32_multiply(x, y):
    """FP32 x * y rounded to nearest even (IEEE zeros and infinities; a NaN result is 0x7FC00000)."""
    cls_x, sign_x, exp_x, sig_x = unpack(x, FP32_EBITS, FP32_FBITS, IEEE, 0)
    cls_y, sign_y, exp_y, sig_y = unpack(y, FP32_EBITS, FP32_FBITS, IEEE, 0)
    sign = sign_x ^ sign_y
    if cls_x == NAN or cls_y == NAN:
        return FP32_NAN_BITS
    if cls_x == INF or cls_y == INF:
        if cls_x == ZERO or cls_y == ZERO:
            return FP32_NAN_BITS  # inf * 0
        return (sign << 31) | 0x7F800000
    if cls_x == ZERO or cls_y == ZERO:
        return sign << 31
    return fp32_round(sign, exp_x + exp_y, sig_x * sig_y, 0)


# --- quantisation ---------------------------------------------------------------------------------


@njit(cache=True, forceinline=True, error_model="numpy")
def block_amax(source, start, count, src_ebits, src_fbits, src_encoding):
    """(largest magnitude as bits, whether every element is finite) of source[start:start+count].

    Magnitudes as bits order like the values. Loops over range(count) from ``start``: LLVM
    vectorises those, where it does not vectorise range(start, stop).
    """
    magnitude_mask = (1 << (src_ebits + src_fbits)) - 1
    largest = 0
    finite = True
    if src_encoding == IEEE:  # IEEE 754's layout: magnitudes order as codes, non-finite at the top
        for j in range(count):
            largest = max(largest, int(source[start + j]) & magnitude_mask)
        return largest, largest < (((1 << src_ebits) - 1) << src_fbits)
    for j in range(count):
        cls = unpack(source[start + j], src_ebits, src_fbits, src_encoding, 0)[0]
        if cls == NAN or cls == INF:
            finite = False
        else:
            largest = max(largest, int(source[start + j]) & magnitude_mask)
    return largest, finite

def make_mx_quantizer(src_ebits, src_fbits, src_encoding, ebits, fbits, encoding, integer, emax,
                      max_normalized, nan_fill, rounding, stochastic, fixed_block_size):
    """A compiled ``quantize(bits, random, rule, mode, block_size, sr_bits, elements, scales)`` for one
    MX format: ``rule`` FLOOR or RCEIL; ``rounding`` is FIXED_RNE (``mode`` is then ignored) or
    RUNTIME_ROUNDING; ``fixed_block_size`` a block size (``block_size`` is then ignored) or
    RUNTIME_BLOCK_SIZE.

    ``bits`` (rows, n) holds source patterns (any integer dtype); ``elements`` (rows, n) and
    ``scales`` (rows, ceil(n / block_size)) are uint8 outputs. ``integer``: MXINT8 (two's complement
    k / 64) instead of a float element format (ebits, fbits, encoding). ``emax``: the exponent of
    the element format's largest binade; ``max_normalized``: its largest significand with the
    leading bit at bit 61 (for rceil). ``nan_fill``: the element pattern of a NaN-scale block.
    ``stochastic``: ``random`` (rows, n) holds each element's uint32 word (else it is (rows, 0)).
    """
    element_sign_shift = ebits + fbits  # (MXINT8 has no -0: its zeros are 0)

    @njit(cache=True, error_model="numpy")
    def quantize(bits, random, rule, mode, block_size, sr_bits, elements, scales):
        mode = rounding if rounding == FIXED_RNE else mode
        block_size = fixed_block_size if fixed_block_size != RUNTIME_BLOCK_SIZE else block_size
        rows, n = bits.shape
        for row in range(rows):
            source, out = bits[row], elements[row]
            draws = random[row]  # (rows, 0) without stochastic rounding
            for block in range(scales.shape[1]):
                start = block * block_size
                count = min(block_size, n - start)
                largest, finite = block_amax(source, start, count, src_ebits, src_fbits, src_encoding)
                if not finite:
                    scales[row, block] = E8M0_NAN
                    for j in range(count):
                        out[start + j] = nan_fill
                    continue
                cls, _, exp, sig = unpack(largest, src_ebits, src_fbits, src_encoding, 0)
                if cls == ZERO:
                    shared = SCALE_EXP_MIN
                else:
                    top = msb_index(sig)
                    shared = exp + top - emax  # floor(log2(amax)) - emax
                    if rule == RCEIL and (sig << (61 - top)) > max_normalized:
                        shared += 1  # amax / 2**shared would exceed the element format's max
                    shared = min(max(shared, SCALE_EXP_MIN), SCALE_EXP_MAX)
                scales[row, block] = shared + E8M0_BIAS
                # Branch-free per element (zeros are rounded as 1 and then replaced), so it vectorises.
                for j in range(count):
                    cls, sign, exp, sig = unpack(source[start + j], src_ebits, src_fbits, src_encoding, 0)
                    zero = cls == ZERO
                    draw = (int(draws[start + j]) >> (32 - sr_bits)) if stochastic else 0
                    if integer:
                        pattern, _ = round_pack(sign, exp - shared, sig | int(zero), INT8_EXPONENT_BITS,
                                                INT8_FRACTION_BITS, FINITE_ONLY, mode, 0, 0, 1, draw, sr_bits)
                        k = pattern & 0xFF
                        k = max(-k, -128) if sign else min(k, 127)  # saturate to two's complement
                        out[start + j] = 0 if zero else k & 0xFF
                    else:
                        pattern, _ = round_pack(sign, exp - shared, sig | int(zero), ebits, fbits, encoding,
                                                mode, 0, 0, 1, draw, sr_bits)
                        out[start + j] = (sign << element_sign_shift) if zero else pattern
    return quantize


def make_nvfp4_quantizer(src_ebits, src_fbits, src_encoding, rounding, stochastic, fixed_block_size):
    """A compiled ``quantize(bits, random, mode, block_size, sr_bits, coefficient, decode, elements,
    scales)`` for NVFP4 (``rounding`` and ``fixed_block_size`` as for make_mx_quantizer). ``coefficient``: FP32 bits of
    fl32(S_enc * fl32(1/6)); ``decode``: FP32 bits of S_dec = fl32(1 / S_enc). Per block: the E4M3
    scale fl8(fl32(amax_b * coefficient)), the encode factor fl32(1 / fl32(scale * S_dec)) (FLT_MAX
    for a zero scale), and each element fl4(fl32(x * factor)). Every fl32 is FP32 RNE; fl8 is E4M3
    RNE saturating; fl4 is E2M1 in ``mode``, saturating. A block holding inf or NaN gets the NaN
    scale 0x7F and zero elements."""

    @njit(cache=True, error_model="numpy")
    def quantize(bits, random, mode, block_size, sr_bits, coefficient, decode, elements, scales):
        mode = rounding if rounding == FIXED_RNE else mode
        block_size = fixed_block_size if fixed_block_size != RUNTIME_BLOCK_SIZE else block_size
        rows, n = bits.shape
        _, _, c_exp, c_sig = unpack(coefficient, FP32_EBITS, FP32_FBITS, IEEE, 0)
        _, _, d_exp, d_sig = unpack(decode, FP32_EBITS, FP32_FBITS, IEEE, 0)
        for row in range(rows):
            source, out, draws = bits[row], elements[row], random[row]
            for block in range(scales.shape[1]):
                start = block * block_size
                count = min(block_size, n - start)
                largest, finite = block_amax(source, start, count, src_ebits, src_fbits, src_encoding)
                if not finite:
                    scales[row, block] = E4M3_NAN
                    for j in range(count):
                        out[start + j] = 0
                    continue
                cls, _, a_exp, a_sig = unpack(largest, src_ebits, src_fbits, src_encoding, 0)
                scale = 0
                if cls != ZERO:
                    product, shift = multiply_jam(a_sig, c_sig)
                    amax_scaled = fp32_round(0, a_exp + c_exp + shift, product, 1)
                    p_cls, _, p_exp, p_sig = unpack(amax_scaled, FP32_EBITS, FP32_FBITS, IEEE, 0)
                    if p_cls != ZERO:
                        scale, _ = round_pack(0, p_exp, p_sig, E4M3_EBITS, E4M3_FBITS, FN, RNE, 0, 0, 1, 0, 32)
                scales[row, block] = scale
                if scale == 0:
                    factor = FP32_MAX_BITS  # fminf(1 / 0, FLT_MAX)
                else:
                    _, _, s_exp, s_sig = unpack(scale, E4M3_EBITS, E4M3_FBITS, FN, 0)
                    factor = fp32_reciprocal(fp32_round(0, s_exp + d_exp, s_sig * d_sig, 1))
                _, _, f_exp, f_sig = unpack(factor, FP32_EBITS, FP32_FBITS, IEEE, 0)
                for j in range(count):
                    cls, sign, exp, sig = unpack(source[start + j], src_ebits, src_fbits, src_encoding, 0)
                    pattern = sign << (E2M1_EBITS + E2M1_FBITS)
                    if cls != ZERO:
                        product, shift = multiply_jam(sig, f_sig)
                        scaled = fp32_round(sign, exp + f_exp + shift, product, 1)
                        t_cls, t_sign, t_exp, t_sig = unpack(scaled, FP32_EBITS, FP32_FBITS, IEEE, 0)
                        if t_cls != ZERO:  # x * factor underflowed FP32: the zero of its sign
                            draw = (int(draws[start + j]) >> (32 - sr_bits)) if stochastic else 0
                            pattern, _ = round_pack(t_sign, t_exp, t_sig, E2M1_EBITS, E2M1_FBITS, FINITE_ONLY,
                                                    mode, 0, 0, 1, draw, sr_bits)
                    out[start + j] = pattern
    return quantize


@njit(cache=True, error_model="numpy")
def finite_amax_bits(bits, ebits, fbits, encoding):
    """The largest magnitude (as bits, sign cleared) among the finite values of a flat array."""
    magnitude_mask = (1 << (ebits + fbits)) - 1
    largest = 0
    for i in range(bits.size):
        cls = unpack(bits[i], ebits, fbits, encoding, 0)[0]
        if cls == FINITE:
            largest = max(largest, int(bits[i]) & magnitude_mask)
    return largest


# --- matmul ---------------------------------------------------------------------------------------

@njit(cache=True, error_model="numpy")
def block_scaled_matmul(a_sig, a_exp, a_cls, b_sig, b_exp, b_cls, a_scale_sig, a_scale_exp, a_scale_nan,
                        b_scale_sig, b_scale_exp, b_scale_nan, block_size, base_exp, apply_tensor_factor,
                        tensor_factor, out):
    """out[i, j] (FP32 bits) = the FP32 sum, in increasing block order from +0, of each block's
    exact dot product times its two scales rounded once to FP32; then, if ``apply_tensor_factor``,
    times ``tensor_factor`` (FP32 bits; nearest even).

    Operands come decoded: element (i, k) of A is a_sig[i, k] * 2**(a_exp[i, k] + lowest_a) with a_sig
    signed and a_exp >= 0 (class in a_cls: ZERO/FINITE/INF/NAN), B's likewise with its own format's
    lowest exponent, base_exp = lowest_a + lowest_b; B is transposed, (n, k).
    A block scale is scale_sig * 2**scale_exp (scale_sig 0: a zero scale), or NaN. The dot product
    of a block is summed exactly in two int64 limbs: value = (high * 2**32 + low) * 2**base_exp.
    """
    m, k_total = a_sig.shape
    n = b_sig.shape[0]
    blocks = a_scale_sig.shape[1]
    for i in range(m):
        for j in range(n):
            accumulator = 0  # FP32 +0
            for block in range(blocks):
                start = block * block_size
                stop = min(start + block_size, k_total)
                nan = a_scale_nan[i, block] or b_scale_nan[j, block]
                positive_inf = False
                negative_inf = False
                high = 0
                low = 0
                for k in range(start, stop):
                    ca, cb = a_cls[i, k], b_cls[j, k]
                    if ca == FINITE and cb == FINITE:
                        term = a_sig[i, k] * b_sig[j, k]
                        shift = a_exp[i, k] + b_exp[j, k]
                        if shift >= 32:
                            high += term << (shift - 32)
                        else:
                            low += term << shift
                            high += low >> 32  # keep low in [0, 2**32): the sum stays exact
                            low &= 0xFFFFFFFF
                    elif ca == NAN or cb == NAN or (ca == INF and cb == ZERO) or (ca == ZERO and cb == INF):
                        nan = True
                    elif ca == INF or cb == INF:
                        negative = (a_sig[i, k] < 0) != (b_sig[j, k] < 0)  # infinities carry their sign in sig
                        if negative:
                            negative_inf = True
                        else:
                            positive_inf = True
                scale_sig = a_scale_sig[i, block] * b_scale_sig[j, block]
                if positive_inf or negative_inf:
                    nan = nan or (positive_inf and negative_inf) or scale_sig == 0
                if nan:
                    accumulator = FP32_NAN_BITS
                    continue
                if positive_inf or negative_inf:
                    term_bits = 0xFF800000 if negative_inf else 0x7F800000
                    accumulator = fp32_add(accumulator, term_bits)
                    continue
                if high < 0:  # negate the two-limb value
                    sign = 1
                    high = -high - int(low != 0)
                    low = ((1 << 32) - low) & 0xFFFFFFFF
                else:
                    sign = 0
                if (high == 0 and low == 0) or scale_sig == 0:
                    continue  # an exact zero adds +0: the accumulator (never -0) stays as it is
                exp = base_exp
                if high == 0:
                    sig = low
                else:
                    width = msb_index(high) + 33
                    if width <= 61:
                        sig = (high << 32) | low
                    else:
                        drop = width - 61
                        sig = (high << (32 - drop)) | (low >> drop) | int((low & ((1 << drop) - 1)) != 0)
                        exp += drop
                product, shift = multiply_jam(sig, scale_sig)
                exp += shift + a_scale_exp[i, block] + b_scale_exp[j, block]
                accumulator = fp32_add(accumulator, fp32_round(sign, exp, product, 0))
            if apply_tensor_factor:
                accumulator = fp32_multiply(accumulator, tensor_factor)
            out[i, j] = accumulator
