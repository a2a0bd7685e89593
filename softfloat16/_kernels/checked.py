"""Binary64 sums of binary32 products rounded into a narrower accumulator by the host's conversions,
with a check that says where that is not the one rounding of the exact sum.

A step ``acc + a * b`` of binary32 values is computed as one binary64 fused multiply-add, ``s``: the
exact sum rounded once to nearest even into binary64. Rounding ``s`` again to nearest (even or away)
into a format of ``p`` < 53 bits gives the correctly rounded exact sum, unless ``s`` lies exactly
halfway between two adjacent values of that format: the exact sum and ``s`` are on the same side of
every such midpoint (each midpoint is a binary64 value and rounding is monotonic), so they round
alike; on a midpoint ``s`` may have come from either side. So a kernel rounds with the host's
conversions and keeps the minimum of :func:`undecided` over its steps: zero where some ``s`` was a
midpoint, and then it computes that part again with the exact steps (_kernels.twosum).

The kinds (:func:`kind_of`, from a wide spec of _kernels.twosum):

- ``BINARY32``: FP32 accumulation to nearest even or with ties away (they differ only on
  midpoints). The host converts binary64 to binary32. Binary32's subnormal midpoints are not
  checked: the caller uses this kind only where every product is a multiple of 2**-149 (then so is
  every sum, and below 2**-126 no sum rounds at all).
- ``FP16``: FP16 accumulation to nearest even, where the host converts binary32 to binary16 in one
  instruction (twosum.HALF_CONVERSION). ``s`` is first cut to 24 bits with its last bit set where
  bits were lost (round to odd, exact in binary32: 24 >= 11 + 2, so rounding it to FP16 is rounding
  ``s``). Below FP16's smallest normal 2**-14 its midpoints are the odd multiples of 2**-25.
"""
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .core import RNA, RNE
from .twosum import BINARY32_IN_BINARY64, HALF_CONVERSION, spec_of

NONE, BINARY32, FP16 = 0, 1, 2
_LOW = {BINARY32: 29, FP16: 42}  # binary64 fraction bits below the kind's last bit, plus the midpoint's
_BINARY32_RNA = spec_of(RNA, 24, -126, float(np.finfo(np.float32).max), wide=True)
_FP16_RNE = spec_of(RNE, 11, -14, 65504.0, wide=True)


def kind_of(spec: tuple) -> int:
    """The kind (BINARY32, FP16) that rounds like a wide spec of _kernels.twosum, else NONE."""
    if spec in (BINARY32_IN_BINARY64, _BINARY32_RNA):
        return BINARY32
    return FP16 if spec == _FP16_RNE and HALF_CONVERSION else NONE


def ties_away(spec: tuple) -> bool:
    """Whether a spec of kind BINARY32 rounds ties away (a midpoint then needs the exact steps even
    where the sum is exact)."""
    return spec == _BINARY32_RNA


def _literal(kind):
    return kind.literal_value if isinstance(kind, types.IntegerLiteral) else None


@intrinsic
def narrowed(typingctx, s, kind):
    """The binary64 ``s`` rounded by the host's conversions into ``kind`` (a literal), as a binary64
    value: to nearest even, which is the kind's rounding wherever :func:`undecided` is not zero.
    (A binary32 ``s``, in kernels compiled for either float, is only widened.)"""
    if not isinstance(s, types.Float) or _literal(kind) not in (BINARY32, FP16):
        return None
    which = _literal(kind)

    def codegen(context, builder, signature, args):
        i64, f64, f32 = ir.IntType(64), ir.DoubleType(), ir.FloatType()
        value = args[0]
        if signature.args[0] != types.float64:
            return builder.fpext(value, f64)
        if which == FP16:
            bits = builder.bitcast(value, i64)
            lost = builder.and_(bits, ir.Constant(i64, (1 << 29) - 1))
            sticky = builder.zext(builder.icmp_unsigned("!=", lost, ir.Constant(i64, 0)), i64)
            odd = builder.or_(builder.sub(bits, lost), builder.shl(sticky, ir.Constant(i64, 29)))
            single = builder.fptrunc(builder.bitcast(odd, f64), f32)  # exact: 24 bits
            return builder.fpext(builder.fpext(builder.fptrunc(single, ir.HalfType()), f32), f64)
        return builder.fpext(builder.fptrunc(value, f32), f64)

    return types.float64(s, kind), codegen


@intrinsic
def half_rounded(typingctx, x):
    """The binary32 ``x`` rounded to nearest even into FP16 by the host's conversion (FP16 kind only:
    twosum.HALF_CONVERSION), as a binary32 value. A sum of two FP16 values rounded to binary32
    first and then to FP16 is the sum rounded once: 24 >= 2 x 11 + 2 bits."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.fptrunc(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(x), codegen


@intrinsic
def undecided(typingctx, s, kind):
    """Zero where the host's rounding of the binary64 ``s`` into ``kind`` (a literal) may not be the
    rounding of the exact value ``s`` came from: ``s`` is a midpoint of the kind (BINARY32: of its
    normal range; FP16: of its normal range, or below 2**-13, where they are the odd multiples of
    2**-25); else a positive integer (uint64). A minimum over many sums is zero where one of them is
    undecided. (Always 1 for a binary32 ``s``.)"""
    if not isinstance(s, types.Float) or _literal(kind) not in (BINARY32, FP16):
        return None
    low = _LOW[_literal(kind)]
    fp16 = _literal(kind) == FP16

    def codegen(context, builder, signature, args):
        i64, f64 = ir.IntType(64), ir.DoubleType()

        def c(value):
            return ir.Constant(i64, value)

        if signature.args[0] != types.float64:
            return c(1)
        bits = builder.bitcast(args[0], i64)
        key = builder.and_(builder.xor(bits, c(1 << (low - 1))), c((1 << low) - 1))  # the normal range
        if not fp16:
            return key
        # Below 2**-13 FP16's quantum is 2**-24: its midpoints are the odd multiples of 2**-25, where
        # s * 2**24 (exact) is half an odd integer. (A nonzero key of a sum below 2**-14 says nothing
        # and is harmless: only a zero one counts.)
        scaled = builder.fmul(args[0], ir.Constant(f64, 2.0**24))
        even = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f64, [f64]), "llvm.roundeven.f64")
        fabs = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f64, [f64]), "llvm.fabs.f64")
        apart = builder.call(fabs, [builder.fsub(scaled, builder.call(even, [scaled]))])
        half = builder.fcmp_ordered("==", apart, ir.Constant(f64, 0.5))
        small = builder.fcmp_ordered("<", builder.call(fabs, [scaled]), ir.Constant(f64, 2.0**11))
        return builder.select(builder.and_(half, small), c(0), key)

    return types.uint64(s, kind), codegen
