"""A floating-point environment set by someone else in the process (x86's MXCSR: a directed rounding
mode, flush to zero, denormals are zero) changes no result. The kernels that compute with the host's
floating-point arithmetic set the default environment on their thread and restore the caller's
(_kernels/environment.py); here every result under a changed environment is compared, bit for bit,
with the same call's result in the default one (inputs made beforehand, in the default one).

Before the kernels set it: fma to a directed mode (fp32, bf16, tf32; fast.fma_float64's TwoSum) and
every tensor-core instruction whose lanes round to nearest even (FP16 outputs, AMD's adders; np.rint
and TwoSum in mma_lanes and mma_lanes_amd) gave other bits."""
import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import fp32math
from softfloat16._kernels import environment

pytestmark = pytest.mark.skipif(not environment.X86, reason="MXCSR (the rounding control, FTZ/DAZ) is x86's")

DEFAULT = environment.NEAREST
ENVIRONMENTS = {"down": 0x2000, "up": 0x4000, "toward zero": 0x6000, "ftz+daz": 0x8040}


def patterns(rng, fmt: str, shape, specials: float = 0.05) -> np.ndarray:
    """Values of ``fmt`` over a wide range of magnitudes, with some random patterns (NaN, inf,
    subnormals) among them."""
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 8, shape)).astype(np.float32)
    bits = np.asarray(sf.convert(x.view(np.uint32), "fp32", fmt))
    width = sf.format(fmt).width
    raw = rng.integers(0, 1 << width, shape).astype(bits.dtype)
    return np.where(rng.random(shape) < specials, raw, bits)


def under(control: int, call):
    """call() on this thread with MXCSR = ``control`` (one thread: the kernels run here); checks that
    the caller's environment is given back."""
    before = sf.get_num_threads()
    sf.set_num_threads(1)
    old = environment.swap_mxcsr(control)
    try:
        result = call()
        assert environment.swap_mxcsr(control) & 0xFFC0 == control & 0xFFC0  # given back (flags aside)
    finally:
        environment.swap_mxcsr(old)
        sf.set_num_threads(before)
    return result


def same_everywhere(call):
    """call()'s bits in the default environment and under every one of ENVIRONMENTS."""
    want = np.asarray(under(DEFAULT, call)).copy()
    for name, bits in ENVIRONMENTS.items():
        got = np.asarray(under(DEFAULT | bits, call))
        assert got.tobytes() == want.tobytes(), f"{name}: {int((got != want).sum())} results differ"


@pytest.mark.parametrize("fmt", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("rounding", ["rne", "rtz", "rup", "rdn"])
def test_fma(fmt, rounding):
    rng = np.random.default_rng(1)
    a, b, c = (patterns(rng, fmt, 3000) for _ in range(3))
    same_everywhere(lambda: getattr(sf, fmt).fma(a, b, c, rounding=rounding))


def test_fp32_programs():
    """exp and log: FP32 step programs with FMAs (_kernels/programs.py)."""
    rng = np.random.default_rng(2)
    x = patterns(rng, "fp32", 3000)
    same_everywhere(lambda: fp32math.exp(x))
    same_everywhere(lambda: fp32math.log(x))


PRESETS = ["hopper.wgmma.m64n8k16.f16.f16.f16", "turing.mma.m16n8k8.f16.f16.f16.f16",
           "hopper.wgmma.m64n8k16.f32.f16.f16", "ada.mma.m16n8k32.f16.e4m3.e5m2.f16",
           "cdna2.mfma.f32_32x32x8bf16_1k", "cdna3.mfma.f32_16x16x32_fp8_bf8", "cdna3.mfma.f32_16x16x8_xf32",
           "cdna1.mfma.f32_32x32x8f16", "cdna3.mfma.f32_16x16x4_f32"]


@pytest.mark.parametrize("name", PRESETS)
def test_tensor_core_instructions(name):
    p = sf.mma.preset(name)
    rng = np.random.default_rng(3)
    a, b, c = patterns(rng, p.a, (p.m, 4 * p.k)), patterns(rng, p.b, (4 * p.k, p.n)), patterns(rng, p.c, (p.m, p.n))
    same_everywhere(lambda: sf.mma.mma(a, b, c, name))


@pytest.mark.parametrize("options", [dict(accumulate="fp16"), dict(tensor_core="mi300x"), dict()],
                         ids=["h100 fp16 accumulation", "mi300x", "h100"])
def test_tensor_core_gemm(options):
    rng = np.random.default_rng(4)
    a, b = patterns(rng, "fp16", (40, 96), 0.0), patterns(rng, "fp16", (96, 70), 0.0)
    same_everywhere(lambda: sf.linalg.matmul(a, b, "fp16", out_format="fp32", order="tensorcore", **options))
