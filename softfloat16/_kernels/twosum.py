"""Sums rounded into any accumulation format, on the host's binary32 or binary64 arithmetic and
integer steps.

One step of a sum, ``acc + p`` rounded into an accumulation format, for two values of the host's
float (binary32, or binary64): the host adds them to nearest even, ``s``, and Knuth's TwoSum gives
the exact error ``err = (acc + p) - s`` (a value of the same float: the sum of two floats never has
a lost bit that is not one, unless it overflows). The exact sum ``s + err`` is then rounded in
integers:

- into a narrower format (``precision`` at most 22 in binary32 — FP16, BF16, TF32, E5M2 — or 51 in
  binary64): ``s`` is first made the round-to-odd value of the exact sum (its bits truncated toward
  zero, the last bit set when ``err`` is not zero), which keeps the sticky information; with at
  least precision + 2 bits, rounding that value once more, in any mode, gives the correctly
  rounded exact sum. Two of those roundings to nearest even are the host's own conversions
  (binary64 to binary32; binary32 to binary16 where it has one instruction: HALF_CONVERSION).
- into binary32 itself, from binary32: to nearest with ties away (``s`` moves one unit away from
  zero where ``err`` is exactly half a unit toward it) and to odd (the truncation with its last bit
  set).

Both need round to nearest even from the host (the kernels of _kernels/hardware.py set and
check it) and operands whose sums cannot overflow binary32 unnoticed: finite operands
whose products are values of the host's float (the caller checks). An overflow of ``s`` itself is seen (its
exponent field) and rounds as the mode rounds an overflow; so is an infinite accumulator, which
stays infinite where the mode took it there; opposite infinities give a NaN.
"""
import numpy as np
from llvmlite import binding, ir
from numba import njit, types
from numba.core import config
from numba.extending import intrinsic

from .core import RDN, RNA, RNE, ROD, RTZ, RUP

MODES = (RNE, RNA, RTZ, RUP, RDN, ROD)


def _host_half_conversion() -> bool:
    """Whether the code Numba compiles here converts binary32 to binary16 in one instruction (x86's
    F16C, AArch64's fcvt): compiled for this host's own CPU and features (Numba's cache is keyed on
    them, so code compiled with it never runs elsewhere)."""
    if config.CPU_NAME not in (None, "host") or config.CPU_FEATURES is not None:
        return False
    triple = binding.get_process_triple()
    if triple.startswith("aarch64") or triple.startswith("arm64"):
        return True
    return triple.startswith("x86_64") and bool(binding.get_host_cpu_features().get("f16c", False))


#: FP16 accumulators rounded to nearest even by the host's binary32 -> binary16 conversion (of the
#: round-to-odd sum: the same bits as the integer steps).
HALF_CONVERSION = _host_half_conversion()
FP16_SPEC = (RNE, 11, 127 - 14, 0x477FE000)  # (mode, precision, emin_field, max_bits) of FP16, RNE
PLAIN = (-1, 24, 1, 0x7F7FFFFF)  # the spec of the host's own sum (round to nearest even into binary32)


def _overflow_value(mode: int, negative, builder, max_bits, inf):
    """The magnitude an overflow rounds to: infinity, or the largest finite (toward zero)."""
    if mode in (RNE, RNA):
        return inf
    if mode in (RTZ, ROD):
        return max_bits
    if mode == RUP:
        return builder.select(negative, max_bits, inf)
    return builder.select(negative, inf, max_bits)  # RDN


class _Bits:
    """The integer layout of the host's float a sum is computed in: binary32 or binary64."""

    def __init__(self, wide: bool) -> None:
        self.width = 64 if wide else 32
        self.fraction = 52 if wide else 23
        self.type = ir.IntType(self.width)
        self.sign = 1 << (self.width - 1)
        self.magnitude = self.sign - 1
        self.inf = (0x7FF << 52) if wide else (0xFF << 23)
        self.largest = self.inf - 1  # the largest finite pattern
        self.float = ir.DoubleType() if wide else ir.FloatType()

    def c(self, value: int):
        return ir.Constant(self.type, value)


def _round_narrow(builder, so, mode, precision, emin_field, max_bits, bits: _Bits):
    """Round the pattern ``so`` of the host's float (``bits``: binary32 or binary64; a round-to-odd
    value, or infinity) into a format of ``precision`` bits whose smallest normal exponent is the
    host float's field ``emin_field`` and whose largest finite value has the host pattern
    ``max_bits``: integer steps on the magnitude (the encoding's order is the values' order, so a
    carry into the exponent is right)."""
    fraction, c = bits.fraction, bits.c
    smallest_bits = (emin_field - precision + 1) << fraction if emin_field - precision + 1 > 0 else (
        1 << (emin_field + fraction - precision))  # the target's smallest subnormal, 2**(emin - precision + 1)
    sign = builder.and_(so, c(bits.sign))
    negative = builder.icmp_unsigned("!=", sign, c(0))
    mag = builder.and_(so, c(bits.magnitude))
    field = builder.lshr(mag, c(fraction))
    field = builder.select(builder.icmp_unsigned("<", field, c(1)), c(1), field)  # subnormal: field 1's scale
    below = builder.icmp_unsigned("<", field, c(emin_field))
    extra = builder.select(below, builder.sub(c(emin_field), field), c(0))  # the target's subnormals
    drop = builder.add(c(fraction + 1 - precision), extra)
    # At most every fraction bit goes: below that the value is under one unit of the target (tiny).
    tiny = builder.icmp_unsigned(">", drop, c(fraction))
    nonzero = builder.icmp_unsigned("!=", mag, c(0))
    tie_or_more = builder.icmp_unsigned("==", drop, c(fraction + 1))  # the value in [unit / 2, unit)
    drop = builder.select(tiny, c(fraction), drop)
    unit = builder.shl(c(1), drop)
    mask = builder.sub(unit, c(1))
    keep = builder.xor(mask, c(-1))
    # The last kept bit of the significand (the implicit bit when every fraction bit goes).
    odd = builder.and_(builder.lshr(builder.or_(mag, c(1 << fraction)), drop), c(1))
    if mode == RNE:
        r = builder.and_(builder.add(mag, builder.add(builder.lshr(mask, c(1)), odd)), keep)
        up = builder.and_(tie_or_more, builder.icmp_unsigned("!=", builder.and_(mag, c((1 << fraction) - 1)), c(0)))
    elif mode == RNA:
        r = builder.and_(builder.add(mag, builder.lshr(unit, c(1))), keep)
        up = tie_or_more
    elif mode == RTZ:
        r = builder.and_(mag, keep)
        up = ir.Constant(ir.IntType(1), 0)
    elif mode == RUP:
        r = builder.and_(builder.add(mag, builder.select(negative, c(0), mask)), keep)
        up = builder.and_(nonzero, builder.not_(negative))
    elif mode == RDN:
        r = builder.and_(builder.add(mag, builder.select(negative, mask, c(0))), keep)
        up = builder.and_(nonzero, negative)
    else:  # ROD: the truncation, one unit further where it is even and bits were lost
        sticky = builder.icmp_unsigned("!=", builder.and_(mag, mask), c(0))
        even = builder.icmp_unsigned("==", odd, c(0))
        r = builder.add(builder.and_(mag, keep), builder.select(builder.and_(sticky, even), unit, c(0)))
        up = nonzero
    # Under one unit of the target's smallest subnormal: zero or that subnormal.
    r = builder.select(tiny, builder.select(up, c(smallest_bits), c(0)), r)
    over = builder.icmp_unsigned(">", r, c(max_bits))
    r = builder.select(over, _overflow_value(mode, negative, builder, c(max_bits), c(bits.inf)), r)
    return builder.or_(sign, r)


def _truncated_odd(builder, sb, toward, bits: _Bits):
    """The pattern ``sb`` truncated toward zero of the exact sum (one unit down where ``s`` lies
    away from it) with its last bit set: the round-to-odd value of an inexact sum."""
    truncated = builder.select(toward, sb, builder.sub(sb, bits.c(1)))
    return builder.or_(truncated, bits.c(1))


def _host_conversion(bits: _Bits, mode, precision, emin_field, max_bits):
    """The narrower float the host converts into to nearest even in one instruction, for this
    rounding: binary32 from binary64, binary16 from binary32 (HALF_CONVERSION); else None."""
    if mode != RNE:
        return None
    if bits.width == 64 and (precision, emin_field) == (24, 1023 - 126):
        return ir.FloatType()
    if bits.width == 32 and HALF_CONVERSION and (mode, precision, emin_field, max_bits) == FP16_SPEC:
        return ir.HalfType()
    return None


def _round_binary32(builder, sb, eb, inexact, toward, mode):
    """The exact sum s + err rounded into binary32 with ties away (RNA) or to odd (ROD), from
    s = RNE(sum) (pattern ``sb``), err's pattern ``eb``, and whether s lies toward zero of the sum."""
    bits = _Bits(False)
    c = bits.c
    mag = builder.and_(sb, c(bits.magnitude))
    overflowed = builder.icmp_unsigned(">=", mag, c(bits.inf))
    if mode == ROD:
        odd = builder.select(inexact, _truncated_odd(builder, sb, toward, bits), sb)
        return builder.select(overflowed, builder.or_(builder.and_(sb, c(bits.sign)), c(bits.largest)), odd)
    # RNA: a tie (|err| is half a unit of s, s toward zero of the sum) goes one unit away. Half a
    # unit of s's binade is 2**(field - 151): pattern (field - 24) << 23, or 1 << (field - 2) below
    # the normal range (a field under 2 has no ties: such sums are exact).
    field = builder.lshr(mag, c(23))
    field = builder.select(builder.icmp_unsigned("<", field, c(2)), c(2), field)
    normal_half = builder.shl(builder.sub(field, c(24)), c(23))
    small = builder.icmp_unsigned("<=", field, c(24))
    tiny_half = builder.shl(c(1), builder.select(small, builder.sub(field, c(2)), c(0)))
    half = builder.select(small, tiny_half, normal_half)
    tie = builder.and_(builder.and_(inexact, toward),
                       builder.icmp_unsigned("==", builder.and_(eb, c(bits.magnitude)), half))
    tie = builder.and_(tie, builder.not_(overflowed))
    return builder.select(tie, builder.add(sb, c(1)), sb)


@intrinsic
def rounded_sum(typingctx, x, y, mode, precision, emin_field, max_bits):
    """``x + y`` (two binary32 or two binary64 values) rounded by ``mode`` into a format of
    ``precision`` bits, smallest normal exponent field ``emin_field`` and largest finite pattern
    ``max_bits`` (both in the layout of x's float): the integers of a spec (spec_of, or PLAIN: the
    host's sum alone), compile-time constants (a kernel's closure variables). The host must round
    to nearest even."""
    spec = (mode, precision, emin_field, max_bits)
    if not (isinstance(x, types.Float) and x == y and all(isinstance(t, types.IntegerLiteral) for t in spec)):
        return None
    mode, precision, emin_field, max_bits = (t.literal_value for t in spec)
    bits = _Bits(x == types.float64)
    binary32_itself = precision == 24 and bits.width == 32  # (_round_binary32: RNA, ROD)
    if mode >= 0 and precision > bits.fraction - 1 and not binary32_itself:
        return None  # round to odd keeps 2 bits more than the target

    def codegen(context, builder, signature, args):
        x_, y_ = args[:2]
        s_ = builder.fadd(x_, y_)
        if mode < 0:
            return s_
        # TwoSum: err = (x - (s - (s - x))) + (y - (s - x)), exact (no fast-math flags: IEEE steps)
        back = builder.fsub(s_, x_)
        err_ = builder.fadd(builder.fsub(x_, builder.fsub(s_, back)), builder.fsub(y_, back))
        sb, eb = builder.bitcast(s_, bits.type), builder.bitcast(err_, bits.type)
        inexact = builder.fcmp_unordered("!=", err_, ir.Constant(bits.float, 0.0))  # NaN: inexact
        # s lies toward zero of the exact sum where err has s's sign.
        toward = builder.icmp_signed(">=", builder.xor(eb, sb), bits.c(0))
        if binary32_itself:
            out = _round_binary32(builder, sb, eb, inexact, toward, mode)
        else:
            so = builder.select(inexact, _truncated_odd(builder, sb, toward, bits), sb)
            narrower = _host_conversion(bits, mode, precision, emin_field, max_bits)
            if narrower is not None:
                # The host's conversion of the round-to-odd value. An infinite sum stays itself: a
                # sum of these terms overflows only from an infinite term, or beyond the target's range.
                converted = builder.fpext(builder.fptrunc(builder.bitcast(so, bits.float), narrower), bits.float)
                infinite = builder.icmp_unsigned("==", builder.and_(sb, bits.c(bits.magnitude)), bits.c(bits.inf))
                out = builder.select(infinite, sb, builder.bitcast(converted, bits.type))
            else:
                out = _round_narrow(builder, so, mode, precision, emin_field, max_bits, bits)
            if mode == RDN:
                # An exact zero sum toward negative is -0 unless both terms are +0 (the host gave +0).
                zero = builder.fcmp_ordered("==", s_, ir.Constant(bits.float, 0.0))
                signs = builder.and_(builder.or_(builder.bitcast(x_, bits.type), builder.bitcast(y_, bits.type)),
                                     bits.c(bits.sign))
                out = builder.select(zero, signs, out)
        # Opposite infinities (partial sums of the pairwise order) give the host's NaN.
        out = builder.select(builder.fcmp_unordered("uno", s_, s_), sb, out)
        return builder.bitcast(out, bits.float)

    return x(x, y, *spec), codegen


@njit(cache=True, error_model="numpy")
def finite(bits):
    """Whether no binary32 pattern in ``bits`` (uint32, any shape) is an infinity or a NaN: the
    largest exponent field is not all ones (a branch-free maximum, vectorised)."""
    flat = bits.ravel()
    top = np.uint32(0)
    for i in range(flat.shape[0]):
        top = max(top, flat[i] & np.uint32(0x7F800000))
    return top != np.uint32(0x7F800000)


def spec_of(mode: int, precision: int, emin: int, max_value: float, wide: bool = False) -> tuple:
    """The spec of rounding ``mode`` into a format of ``precision`` bits, smallest normal exponent
    ``emin`` and largest finite value ``max_value`` (rounded_sum's constants), for sums in binary32
    or (``wide``) binary64: a format of at most 22 bits, or binary32 itself with RNA or ROD; wide,
    any format of at most 51 bits (binary32 included, in every mode)."""
    limit = 51 if wide else 22
    if mode not in MODES or precision > limit and (wide or precision != 24 or mode not in (RNA, ROD)):
        raise ValueError(f"no exact rounding of a binary{64 if wide else 32} sum to {precision} bits in mode {mode}")
    if wide:
        return (int(mode), int(precision), int(emin) + 1023, int(np.float64(max_value).view(np.int64)))
    return (int(mode), int(precision), int(emin) + 127, int(np.float32(max_value).view(np.int32)))


# Binary64 sums rounded to nearest even into binary32 (FP32 accumulation of FP32 products). Where
# both terms are binary32 values, the host's binary64 sum converted to binary32 is that rounding:
# binary64 has 53 >= 2 * 24 + 2 bits, so the two roundings to nearest even give the one rounding.
BINARY32_IN_BINARY64 = spec_of(RNE, 24, -126, float(np.finfo(np.float32).max), wide=True)
