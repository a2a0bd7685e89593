"""The aligning adders in float64 lanes (softfloat16._kernels.mma_lanes, what softfloat16.mma.mma runs
for them) bit for bit against the scalar kernel (mma.mma_gemm, one element at a time with integers),
over shapes at every edge of the lanes' tiles (ROWS rows x LANES columns, steps of the instruction's
k) and every kind of operand: zeros, subnormals, infinities, NaN, overflow, with and without C."""
import numpy as np
import pytest

from softfloat16 import mma as api
from softfloat16._kernels import mma as kernel
from softfloat16._kernels.mma_lanes import LANES, ROWS
from softfloat16.mma_presets import PRESETS, model_params
from softfloat16.mma_reference import KINDS, random_operands

# One preset per adder and output: truncated into FP32 (FP16 and TF32 inputs), into E8M13 (FP8),
# into FP16 (rounded to nearest even), block-scaled (scales folded in), group sums (FP4), and the
# AMD adders (C apart; the FP8 one's products split in odd and even).
NAMES = ["hopper.wgmma.m64n8k16.f32.f16.f16", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
         "hopper.wgmma.m64n8k32.f32.e4m3.e5m2", "hopper.wgmma.m64n8k16.f16.f16.f16",
         "blackwell.tcgen05.m128n8k32.kind::mxf8f6f4.block32.f32.e5m2.e4m3.ue8m0",
         "rtx_blackwell.mma.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
         "cdna3.mfma.f32_32x32x4_2b_f16", "cdna3.mfma.f32_16x16x32_fp8_fp8"]


def _scalar(p, a, b, c, sa, sb):
    """D's bits from the scalar kernel: K padded with zero products to whole instructions as mma.mma does."""
    a, b = api._bits(a, p.a, "a"), api._bits(b, p.b, "b")
    pad = -a.shape[1] % p.k
    a = np.concatenate([a, np.zeros((a.shape[0], pad), np.int64)], axis=1)
    b = np.concatenate([b, np.zeros((pad, b.shape[1]), np.int64)], axis=0)
    if sa is None:
        sa = sb = api._decoded(np.zeros((1, 1), np.int64), p.a)
    else:
        sa = api._decoded(api._bits(sa, p.scale, "scale_a"), p.scale)
        sb = api._decoded(api._bits(sb, p.scale, "scale_b").T, p.scale)
    c_bits = np.zeros((a.shape[0], b.shape[1]), np.int64) if c is None else api._bits(c, p.c, "c")
    out = np.empty(c_bits.shape, np.int64)
    kernel.mma_gemm(api._decoded(a, p.a), api._decoded(np.ascontiguousarray(b.T), p.b), c_bits, c is not None,
                    api._layout(p.c), api._layout(p.d), sa, sb, out, model_params(p.model, p.block))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_lanes_equal_the_scalar_kernel(name):
    p = PRESETS[name]
    k = p.k
    scaled = p.scale is not None
    # (M, N, K): one element; primes; M past a tile of ROWS rows, N past LANES columns, K not a
    # multiple of the instruction's k (block-scaled presets take whole instructions).
    shapes = [(1, 1, k if scaled else 1), (ROWS + 1, LANES + 3, 2 * k if scaled else 2 * k + 3),
              (3, 7, 3 * k if scaled else k + 1)]
    for number, kind in enumerate(KINDS):
        for m, n, depth in shapes:
            a, b, c, sa, sb = random_operands(p, m, n, depth, kind, seed=number)
            for c_in in (c, None):
                lanes = api.mma(a, b, c_in, p, scale_a=sa, scale_b=sb)
                scalar = _scalar(p, a, b, c_in, sa, sb)
                assert np.array_equal(lanes.astype(np.int64), scalar), (kind, (m, n, depth), c_in is None,
                                                                        np.argwhere(lanes != scalar)[:3])


@pytest.mark.parametrize("name", ["hopper.wgmma.m64n8k8.f32.tf32.tf32", "cdna3.mfma.f32_16x16x8_xf32"])
def test_results_in_fp32_subnormals(name):
    """Products and sums around FP32's smallest normal 2**-126, rounded into its subnormals."""
    p = PRESETS[name]
    rng = np.random.default_rng(5)
    values = [rng.standard_normal((m, 4 * p.k)) * 2.0**-63 for m in (ROWS + 2, 11)]
    a, b = (np.ascontiguousarray(x.astype(np.float32)).view(np.uint32) & 0xFFFFE000 for x in values)
    b = np.ascontiguousarray(b.T)
    c = (rng.standard_normal((ROWS + 2, 11)) * 2.0**-127).astype(np.float32).view(np.uint32)
    for c_in in (c, None):
        lanes = api.mma(a, b, c_in, p)
        scalar = _scalar(p, a, b, c_in, None, None)
        assert np.array_equal(lanes.astype(np.int64), scalar), np.argwhere(lanes != scalar)[:3]
        exponents = (scalar >> 23) & 0xFF
        assert (exponents == 0).sum() > 10 and (exponents == 1).sum() > 5  # subnormal and smallest normal results
