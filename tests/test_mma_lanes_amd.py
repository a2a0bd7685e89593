"""The CDNA1 / CDNA2 adders and the FP32 FMA chains in float64 lanes (softfloat16._kernels.mma_lanes_amd):
bit for bit the scalar kernel's (mma.mma_gemm, the reference) over every kind of operand and every
shortcut of the FTZ adders, and MMA-Sim's (skipped with its reason where it cannot be imported)."""
import numpy as np
import pytest

from softfloat16 import mma as api
from softfloat16._kernels import mma as kernel
from softfloat16._kernels import mma_lanes_amd
from softfloat16.mma_presets import PRESETS, model_params
from softfloat16.mma_reference import KINDS, compare, mmasim_missing, random_operands

needs_mmasim = pytest.mark.skipif(mmasim_missing() is not None, reason=str(mmasim_missing()))
# One preset per adder and input format: FMA (FP32), exact sums (FP16, BF16), FTZ pairs and quads.
NAMES = ["cdna1.mfma.f32_32x32x2f32", "cdna1.mfma.f32_32x32x8f16", "cdna1.mfma.f32_16x16x8bf16",
         "cdna2.mfma.f32_32x32x4bf16", "cdna2.mfma.f32_16x16x16bf16_1k", "cdna2.mfma.f32_32x32x8f16"]


def _both(name, a, b, c):
    """(scalar kernel's D, lanes' D, the FTZ plan) for bit arrays a, b, c."""
    p = PRESETS[name]
    da = api._decoded(api._bits(a, p.a, "a"), p.a)
    db = api._decoded(np.ascontiguousarray(api._bits(b, p.b, "b").T), p.b)
    no_scale = api._decoded(np.zeros((1, 1), np.int64), p.a)
    args = (api._bits(c, p.c, "c"), True, api._layout(p.c), api._layout(p.d), no_scale, no_scale)
    params = model_params(p.model, 0)
    scalar, lanes = (np.empty(c.shape, np.int64) for _ in range(2))
    kernel.mma_gemm(da, db, *args, scalar, params)
    mma_lanes_amd.mma_gemm(da, db, *args, lanes, params)
    return scalar, lanes, mma_lanes_amd.ftz_plan(da, db)


@pytest.mark.parametrize("name", NAMES)
def test_lanes_equal_the_scalar_kernel(name):
    p = PRESETS[name]
    plans = set()
    for number, kind in enumerate(KINDS):
        a, b, c, _, _ = random_operands(p, 9, 70, 8 * p.k, kind, seed=number)  # 70: a partial tile of lanes
        scalar, lanes, plan = _both(name, a, b, c)
        assert np.array_equal(scalar, lanes), (kind, np.argwhere(scalar != lanes)[:3])
        plans.add(plan)
    if p.model.adder.startswith("ftz"):
        # Exponents spread wide: the products still FP32 normal numbers, their sums no longer exact.
        a, b, c, _, _ = random_operands(p, 9, 70, 8 * p.k, "near_one", seed=9)
        scalar, lanes, plan = _both(name, _spread(a, p.a, 40 if p.a == "bf16" else 12), b, c)
        assert np.array_equal(scalar, lanes)
        # Every shortcut was taken, and none (BF16 products of the "wide" kind leave FP32's range; FP16's
        # never do).
        assert plans | {plan} == ({0, 1, 2} if p.a == "bf16" else {1, 2})


def _spread(codes, name, spread):
    """Codes with their exponent fields moved by up to +-spread (kept normal and finite)."""
    fmt = api._format(name)
    f, e = fmt.fraction_bits, fmt.exponent_bits
    field = (codes >> f) & ((1 << e) - 1)
    field = np.clip(field + np.random.default_rng(9).integers(-spread, spread + 1, codes.shape), 1, (1 << e) - 2)
    return (codes & ~(((1 << e) - 1) << f)) | (field << f)


def test_a_float64_tie_is_not_an_fp32_tie():
    """(1 + 2**-18) * 2**-24 (1 - 2**-18) + (1 + 2**-23) is 1 + 2**-23 + 2**-24 - 2**-60: float64 rounds
    it to the FP32 midpoint 1 + 2**-23 + 2**-24 (a tie, to even: 1 + 2**-22); once rounded, it is
    1 + 2**-23, below the midpoint."""
    a = np.array([[0x3F800020]], np.uint32)
    b = np.array([[0x337FFFC0]], np.uint32)
    scalar, lanes, _ = _both("cdna1.mfma.f32_32x32x1f32", a, b, np.array([[0x3F800001]], np.uint32))
    assert scalar[0, 0] == lanes[0, 0] == 0x3F800001


def test_exact_adder_falls_back_where_float64_is_not_exact():
    """256 (1 + 2**-23) + 2**-8 * 2**-8 - 2**-24 * 2**-24 spans 57 bits: float64 rounds it to the FP32
    midpoint (a tie, to even: 256 (1 + 2**-22)); the lane takes the scalar step, 256 (1 + 2**-23)."""
    a = np.array([[0x1C00, 0x0001, 0, 0]], np.uint16)  # fp16 2**-8, 2**-24
    b = np.array([[0x1C00], [0x8001], [0], [0]], np.uint16)  # 2**-8, -2**-24
    scalar, lanes, _ = _both("cdna1.mfma.f32_32x32x8f16", a, b, np.array([[0x43800001]], np.uint32))
    assert scalar[0, 0] == lanes[0, 0] == 0x43800001


@needs_mmasim
@pytest.mark.parametrize("name", NAMES)
def test_lanes_match_mmasim(name):
    k = PRESETS[name].k
    for number, kind in enumerate(KINDS):
        assert compare(name, 3, 66, k * (1 + number % 2), kind, seed=number)[1] == 0, kind
    assert compare(name, 2, 65, 256, "mixed", seed=3)[1] == 0
