"""The host's floating-point environment, which someone else in the process may have changed.

Every kernel that computes with the host's floating-point arithmetic and relies on its rounding
(a sum rounded to nearest even, TwoSum's exact error, np.rint) or on subnormal values (no flush to
zero, no denormals-are-zero) sets this thread's environment itself where it can (x86's MXCSR:
:func:`swap_mxcsr`), restores it afterwards, and checks it with :func:`env_ok` elsewhere; a kernel
whose check fails reports it, and its caller runs the integer kernels instead.
"""
import numpy as np
from llvmlite import binding, ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .core import RDN, RNE, RTZ, RUP

X86 = binding.get_process_triple().startswith("x86_64")
# x86's MXCSR: every exception masked, no FTZ, no DAZ, and the rounding-control field per mode.
MXCSR = {RNE: 0x1F80, RDN: 0x3F80, RUP: 0x5F80, RTZ: 0x7F80}
NEAREST = MXCSR[RNE]  # the default environment


@intrinsic
def _swap_mxcsr(typingctx, value):
    """Load ``value`` into MXCSR and return the old contents (x86-64 only)."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i32, i8p = ir.IntType(32), ir.IntType(8).as_pointer()
        slot = cgutils.alloca_once(builder, i32)
        void = ir.FunctionType(ir.VoidType(), [i8p])
        builder.call(cgutils.get_or_insert_function(builder.module, void, "llvm.x86.sse.stmxcsr"),
                     [builder.bitcast(slot, i8p)])
        old = builder.load(slot)
        builder.store(builder.trunc(args[0], i32) if args[0].type.width > 32 else args[0], slot)
        builder.call(cgutils.get_or_insert_function(builder.module, void, "llvm.x86.sse.ldmxcsr"),
                     [builder.bitcast(slot, i8p)])
        return builder.sext(old, context.get_value_type(types.int64))

    return types.int64(value), codegen


if X86:
    @njit(cache=True)
    def swap_mxcsr(value):
        """Set this thread's MXCSR; the old value (restore it with another call)."""
        return _swap_mxcsr(value)
else:
    @njit(cache=True)
    def swap_mxcsr(value):
        """Elsewhere the environment is only checked (env_ok), never set: -1."""
        return -1


# The probe's operands: the smallest normal binary64 and binary32 values, 0.75, the smallest
# subnormal binary64 and binary32 values, 2, 1, a value just above half an ulp of 1, half an ulp.
PROBE = np.array([2.0**-1022, 2.0**-126, 0.75, 2.0**-1074, 2.0**-149, 2.0, 1.0, 2.0**-53 + 2.0**-60,
                  2.0**-53, 2.0**-24 + 2.0**-31, 2.0**-24], np.float64)


@njit(cache=True, error_model="numpy")
def env_ok(probe, mode=RNE):
    """Whether this thread rounds binary64 and binary32 results as ``mode`` says (RNE, RTZ, RUP or
    RDN), with subnormal results and operands kept (no FTZ, no DAZ)."""
    tiny64, tiny32, three_quarters = probe[0], np.float32(probe[1]), probe[2]
    sub64, sub32, two, one = probe[3], np.float32(probe[4]), probe[5], probe[6]
    ok = tiny64 * three_quarters != 0.0 and tiny32 * np.float32(three_quarters) != 0  # FTZ
    ok = ok and sub64 * two != 0.0 and sub32 * np.float32(two) != 0  # DAZ
    above64, half64, above32, half32 = probe[7], probe[8], np.float32(probe[9]), np.float32(probe[10])
    # 1 plus just above half an ulp, on both sides of zero: away from 1 or not, as the mode says;
    # nearest even also takes a tie to even (down).
    up_pos, up_neg = mode == RNE or mode == RUP, mode == RNE or mode == RDN
    one32 = np.float32(one)
    ok = ok and (one + above64 == 1.0 + 2.0**-52) == up_pos and (-one - above64 == -(1.0 + 2.0**-52)) == up_neg
    ok = ok and (one32 + above32 == np.float32(1.0 + 2.0**-23)) == up_pos
    ok = ok and (-one32 - above32 == np.float32(-(1.0 + 2.0**-23))) == up_neg
    return ok and (mode != RNE or (one + half64 == one and one32 + half32 == one32))
