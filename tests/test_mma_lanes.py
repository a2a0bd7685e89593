"""The aligning adders in float64 lanes (softfloat16._kernels.mma_lanes, what softfloat16.mma.mma runs
for them) bit for bit against the scalar kernel (mma.mma_gemm, one element at a time with integers),
over shapes at every edge of the lanes' tiles (ROWS rows x LANES columns, steps of the instruction's
k) and every kind of operand: zeros, subnormals, infinities, NaN, overflow, with and without C."""
import numpy as np
import pytest

from softfloat16 import mma as api
from softfloat16._kernels import mma as kernel
from softfloat16._kernels.mma_lanes import LANES, ROWS, narrow_fit
from softfloat16.mma_presets import PRESETS, model_params
from softfloat16.mma_reference import KINDS, random_operands

# One preset per adder and output: truncated into FP32 (FP16, TF32 and BF16 inputs), into E8M13 (FP8),
# into FP16 (rounded to nearest even), block-scaled (scales folded in), group sums (FP4), and the
# AMD adders (C apart; the FP8 one's products split in odd and even).
NAMES = ["hopper.wgmma.m64n8k16.f32.f16.f16", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
         "ampere.mma.m16n8k16.f32.bf16.bf16.f32", "hopper.wgmma.m64n8k32.f32.e4m3.e5m2",
         "hopper.wgmma.m64n8k16.f16.f16.f16",
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


def format_span(name: str) -> tuple[int, int, int]:
    """(largest exponent, smallest quantum exponent, largest significand) of a format's finite
    values, from its properties: the span mma_lanes.narrow_fit reads (of all its values)."""
    f = api._format(name)
    largest = float(f.to_float(np.array([f.max_finite], f.dtype))[0])
    e = int(np.frexp(largest)[1]) - 1
    return e, f.min_subnormal_exponent, (1 << (f.fraction_bits + 1)) - 1  # all fraction bits set below the top


@pytest.mark.parametrize("name", ["hopper.wgmma.m64n8k16.f32.f16.f16", "hopper.wgmma.m64n8k16.f16.f16.f16",
                                  "turing.mma.m16n8k8.f32.f16.f16.f32", "hopper.wgmma.m64n8k32.f32.e4m3.e5m2"])
def test_binary32_terms_at_their_int32_bound(name):
    """The terms in binary32 lanes (mma_lanes._term_sum32, taken for every FP16 and FP8 operand: the
    formats fit narrow_fit) at the largest sums their int32 halves hold: every product the largest
    of the format, all of one sign, on the largest accumulator of that exponent, then with a
    product a quantum below the others (truncated away) and mixed signs."""
    p = PRESETS[name]
    params = model_params(p.model, p.block)
    assert narrow_fit(format_span(p.a), format_span(p.b), params, False)
    fa, fb = api._format(p.a), api._format(p.b)
    biggest_a, biggest_b = int(fa.max_finite), int(fb.max_finite)
    m, n, k = ROWS + 1, LANES + 5, 4 * p.k
    a = np.full((m, k), biggest_a, fa.dtype)
    b = np.full((k, n), biggest_b, fb.dtype)
    a[1, ::3] = a[1, ::3] | (1 << (fa.width - 1))  # mixed signs in row 1
    a[2, 5] = int(fa.min_normal)  # a product far below the others in row 2
    d_fmt = api._format(p.d)
    # C of the products' exponent with every fraction bit set (FP16 C: its largest, products overflow it)
    e = sum(int(np.frexp(float(f.to_float(np.array([x], f.dtype))[0]))[1]) - 1 for f, x in ((fa, biggest_a),
                                                                                            (fb, biggest_b)))
    c = np.full((m, n), int(d_fmt.max_finite) if d_fmt.width == 16 else (e + 127) << 23 | 0x7FFFFF, d_fmt.dtype)
    for c_in in (c, None):
        lanes = api.mma(a, b, c_in, p)
        scalar = _scalar(p, a, b, c_in, None, None)
        assert np.array_equal(lanes.astype(np.int64), scalar), np.argwhere(lanes != scalar)[:3]


def test_bf16_operands_in_binary32_lanes_where_they_fit():
    """BF16's format does not fit narrow_fit (its range is binary32's), its operands may: N(0, 1)
    values do, and take the binary32 lanes; values near 2**±126 do not, and take binary64 ones."""
    p = PRESETS["ampere.mma.m16n8k16.f32.bf16.bf16.f32"]
    params = model_params(p.model, p.block)
    assert not narrow_fit(format_span(p.a), format_span(p.b), params, False)
    rng = np.random.default_rng(11)
    for scale in (1.0, 2.0**-100, 2.0**100):
        a, b = (np.ascontiguousarray((rng.standard_normal(shape) * scale).astype(np.float32)).view(np.uint32) >> 16
                for shape in ((ROWS + 1, 4 * p.k), (4 * p.k, LANES + 1)))
        a, b = a.astype(np.uint16), b.astype(np.uint16)
        lanes = api.mma(a, b, None, p)
        assert np.array_equal(lanes.astype(np.int64), _scalar(p, a, b, None, None, None)), scale


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1"])
def test_operands_read_from_their_fields_as_decoded(name):
    """Every pattern of each plain format read by mma_lanes_operands._lane_fields (branch-free) gives
    the lanes' value, exponent, kind and span that the general decode (mma.decode_one) gives."""
    from softfloat16._kernels import mma_lanes_operands as operands
    fmt = api._layout(name)
    assert operands.plain(tuple(fmt))
    width = api._format(name).width
    bits = np.arange(1 << width, dtype=np.int64).reshape(-1, 1)  # every pattern, one per row of K
    k = bits.shape[0]
    scales = api._decoded(np.zeros((1, 1), np.int64), name)
    got, want = [], []
    for fields, out in ((True, got), (False, want)):
        lanes = (np.empty((1, k, LANES)), np.empty((1, k, LANES), np.int16), np.empty((1, k, LANES), np.bool_),
                 np.empty((1, k, LANES), np.bool_), np.empty((1, k), np.bool_))
        span = np.empty((1, 4), np.int64)
        operands.prepare_tiles(bits, fmt, scales, 1, 0, False, fields, *lanes, span)  # a step per pattern
        out.extend([lanes[0][0, :, 0], np.signbit(lanes[0][0, :, 0]), lanes[1][0, :, 0], lanes[2][0, :, 0],
                    lanes[3][0, :, 0], span])
    f = api._format(name)
    assert want[3].any() and want[4].any() == (f.has_nan or f.has_inf)  # zeros, and NaN or inf where it has them
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
