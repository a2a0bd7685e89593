"""Low-precision GEMM recipes of the torch mode (``emulate(gemm=...)``).

Oracles, independent of the mode's path: ``softfloat16.mx.quantize`` / ``mx.matmul`` called
directly on the operands (MX and NVFP4 recipes) with the instruction named explicitly; for the FP8
recipes torch CPU's own arithmetic for the scales and the FP8 casts (torchao's steps) and
``softfloat16.mma.gemm`` for the product; one block-scaled dot product with ``fractions.Fraction``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16.mx as mx  # noqa: E402
import softfloat16.torch as sft  # noqa: E402
from softfloat16 import mma  # noqa: E402
from softfloat16.torch import EmulationError  # noqa: E402
from softfloat16.torch.recording import load_trace, record  # noqa: E402
from softfloat16.torch.trace_compare import machine_from_settings  # noqa: E402

BLACKWELL = "blackwell.tcgen05.m128n8k32.kind::mxf8f6f4.block32.f32.{}.{}.ue8m0"
PRESETS = {"mxfp8": BLACKWELL.format("e4m3", "e4m3"), "mxfp6": BLACKWELL.format("e2m3", "e2m3"),
           "mxfp4": "blackwell.tcgen05.m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0",
           "nvfp4": "blackwell.tcgen05.m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3",
           "fp8_tensorwise": "hopper.wgmma.m64n8k32.f32.e4m3.e4m3",
           "fp8_rowwise": "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"}
MX_FORMAT = {"mxfp8": "mxfp8_e4m3", "mxfp6": "mxfp6_e2m3", "mxfp4": "mxfp4_e2m1", "nvfp4": "nvfp4"}


def operands(m=8, k=64, n=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = (torch.randn(m, k, generator=generator) * 3).to(torch.bfloat16)
    w = torch.randn(n, k, generator=generator).to(torch.bfloat16)
    return x, w


def as_bf16(fp32_bits: np.ndarray) -> torch.Tensor:
    """FP32 bits rounded to BF16 by torch CPU (nearest even)."""
    return torch.from_numpy(np.ascontiguousarray(fp32_bits, np.uint32).view(np.float32)).to(torch.bfloat16)


def values(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy()


def mx_oracle(recipe, a, b, fmt_a, fmt_b, preset, scale_rule="floor"):
    """mx.matmul of a (M, K) by b (K, N) quantised directly, K zero-padded to the instruction's k."""
    k = mma.preset(preset).k
    pad = -a.shape[1] % k
    a = np.pad(values(a), ((0, 0), (0, pad)))
    b = np.pad(values(b), ((0, pad), (0, 0)))
    rule = {} if recipe == "nvfp4" else {"scale_rule": scale_rule}
    return mx.matmul(mx.quantize(a, fmt_a, axis=1, **rule), mx.quantize(b, fmt_b, axis=0, **rule), preset)


def fp8_operand(t, dim, rowwise, dtype=torch.float8_e4m3fn):
    """torchao's cast: scale = fp8_max / max(amax, 1e-12) in float64, to float32 (rowwise: rounded
    down to a power of two); fp8 = clamp(x * scale) cast to FP8; returns (fp8 bits, 1 / scale)."""
    x = t.detach().float()
    amax = x.abs().amax(dim=dim, keepdim=True) if rowwise else x.abs().max()
    scale = (torch.finfo(dtype).max / amax.double().clamp(min=1e-12)).float()
    if rowwise:
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    top = torch.finfo(dtype).max
    q = (x * scale).clamp(-top, top).to(dtype)
    return q.view(torch.uint8).numpy(), scale.reciprocal()


def fp8_oracle(recipe, a, b, preset, dtype_a=torch.float8_e4m3fn, dtype_b=torch.float8_e4m3fn):
    rowwise = recipe == "fp8_rowwise"
    qa, inv_a = fp8_operand(a, 1, rowwise, dtype_a)
    qb, inv_b = fp8_operand(b, 0, rowwise, dtype_b)
    acc = torch.from_numpy(mma.gemm(qa, qb, preset).astype(np.uint32).view(np.float32))
    return (acc * (inv_a * inv_b)).numpy().view(np.uint32)


@pytest.mark.parametrize("recipe", list(PRESETS))
def test_a_linear_layer_equals_the_quantised_product_on_the_instruction(recipe):
    x, w = operands()
    layer = torch.nn.Linear(64, 16, bias=False).to(torch.bfloat16)
    layer.weight.data.copy_(w)
    core = "h100" if recipe.startswith("fp8") else "b200"
    with torch.no_grad(), sft.emulate(gemm=recipe, tensor_core=core) as mode:
        y = layer(x)
    assert not mode.fallbacks
    if recipe in MX_FORMAT:
        want = mx_oracle(recipe, x, w.T, MX_FORMAT[recipe], MX_FORMAT[recipe], PRESETS[recipe])
    else:
        want = fp8_oracle(recipe, x, w.T, PRESETS[recipe])
    assert torch.equal(y.view(torch.int16), as_bf16(want).view(torch.int16))
    assert not torch.equal(y, x @ w.T)  # the recipe's rounding shows


def test_rceil_and_a_named_instruction_with_a_bias():
    x, w = operands(m=4, k=40, n=8, seed=1)  # K padded to 64 for k = 64
    layer = torch.nn.Linear(40, 8).to(torch.bfloat16)
    layer.weight.data.copy_(w)
    preset = PRESETS["mxfp4"]
    with torch.no_grad(), sft.emulate(gemm="mxfp4", tensor_core=preset, scale_rule="rceil"):
        y = layer(x)
    acc = torch.from_numpy(mx_oracle("mxfp4", x, w.T, "mxfp4_e2m1", "mxfp4_e2m1", preset, "rceil").view(np.float32))
    want = (acc + layer.bias.detach().float()).to(torch.bfloat16)  # the addmm epilogue: FP32, one rounding
    assert torch.equal(y.view(torch.int16), want.view(torch.int16))


def test_backward_quantises_the_gradient_in_grad_format():
    """y = x @ W.T; torch's backward GEMMs: dx = dy @ W and dW = (dy.T @ x) (mm_mat2_backward for a
    transposed mat2): dy in E5M2, x and W in E4M3, each blocked along that GEMM's K."""
    x, w = operands(m=8, k=64, n=16, seed=2)
    x.requires_grad_()
    w.requires_grad_()
    dy = operands(m=8, k=16, seed=3)[0]
    with sft.emulate(gemm="mxfp8", tensor_core="b200", grad_format="e5m2"):
        torch.nn.functional.linear(x, w).backward(dy)
    mixed = "blackwell.tcgen05.m128n8k32.kind::mxf8f6f4.block32.f32.{}.{}.ue8m0"
    dx = mx_oracle("mxfp8", dy, w, "mxfp8_e5m2", "mxfp8_e4m3", mixed.format("e5m2", "e4m3"))
    dw = mx_oracle("mxfp8", dy.T, x, "mxfp8_e5m2", "mxfp8_e4m3", mixed.format("e5m2", "e4m3"))
    assert torch.equal(x.grad.view(torch.int16), as_bf16(dx).view(torch.int16))
    assert torch.equal(w.grad.view(torch.int16), as_bf16(dw).view(torch.int16))
    # fp8_tensorwise's default (torchao's Float8Linear): gradients in E5M2, the rest E4M3.
    x.grad = w.grad = None
    with sft.emulate(gemm="fp8_tensorwise", tensor_core="h100"):
        torch.nn.functional.linear(x, w).backward(dy)
    dx = fp8_oracle("fp8_tensorwise", dy, w, "hopper.wgmma.m64n8k32.f32.e5m2.e4m3", torch.float8_e5m2)
    assert torch.equal(x.grad.view(torch.int16), as_bf16(dx).view(torch.int16))


def test_a_transposed_convolution_backward_quantises_dy_on_either_side():
    """conv_transpose1d with a kernel of 1: dW[ci, co] = sum_l x[ci, l] * dy[co, l] (dy is B: K =
    positions) and dx = dy^T-rows @ w^T (dy is A: K = output channels), dy in E5M2."""
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(1, 4, 32, generator=generator).to(torch.bfloat16).requires_grad_()
    w = torch.randn(4, 8, 1, generator=generator).to(torch.bfloat16).requires_grad_()
    dy = torch.randn(1, 8, 32, generator=generator).to(torch.bfloat16)
    with sft.emulate(gemm="mxfp8", tensor_core="b200", grad_format="e5m2"):
        torch.nn.functional.conv_transpose1d(x, w).backward(dy)
    mixed = "blackwell.tcgen05.m128n8k32.kind::mxf8f6f4.block32.f32.{}.{}.ue8m0"
    dw = mx_oracle("mxfp8", x[0], dy[0].T, "mxfp8_e4m3", "mxfp8_e5m2", mixed.format("e4m3", "e5m2"))
    dx = mx_oracle("mxfp8", dy[0].T, w[:, :, 0].T, "mxfp8_e5m2", "mxfp8_e4m3", mixed.format("e5m2", "e4m3"))
    assert torch.equal(w.grad[:, :, 0].view(torch.int16), as_bf16(dw).view(torch.int16))
    assert torch.equal(x.grad[0].T.view(torch.int16), as_bf16(dx).view(torch.int16))


def test_stochastic_rounding_of_gradients_follows_the_seed():
    x, w = operands(m=8, k=32, n=8, seed=4)
    dy = operands(m=8, k=8, seed=5)[0]
    grads = []
    for seed in (5, 5, 6, None):
        xr = x.clone().requires_grad_()
        options = {"grad_rounding": "sr", "seed": seed} if seed is not None else {}
        with sft.emulate(gemm="nvfp4", tensor_core="b200", **options):
            torch.nn.functional.linear(xr, w).backward(dy)
        grads.append(xr.grad.view(torch.int16))
    assert torch.equal(grads[0], grads[1]) and not torch.equal(grads[0], grads[2])
    assert not torch.equal(grads[0], grads[3])


def test_one_block_scaled_dot_product_exactly():
    """mxfp8, floor rule, one block of 32: amax 3.5 gives the scale 2**(1 - 8); each element
    x / 2**-7 rounds to E4M3 (0.3 * 128 = 38.4 -> 40: E4M3 spacing 4 in [32, 64)); the block's
    exact dot product times both scales is the FP32 result (exact here: small integers)."""
    a_vals = [3.5, -0.3, 1.0, 0.25] + [0.0] * 28
    b_vals = [1.0, 2.0, -0.5, 0.75] + [0.0] * 27 + [6.0]
    a = torch.tensor([a_vals], dtype=torch.float32)
    b = torch.tensor([b_vals], dtype=torch.float32)
    with sft.emulate(gemm="mxfp8", tensor_core="b200"):
        got = float((a @ b.T)[0, 0])

    def quantised(vals):
        amax = max(abs(Fraction(v)) for v in vals)
        exponent = amax.numerator.bit_length() - amax.denominator.bit_length()
        if Fraction(2) ** exponent > amax:
            exponent -= 1
        scale = Fraction(2) ** (exponent - 8)
        return [Fraction(float(torch.tensor(float(Fraction(v) / scale)).to(torch.float8_e4m3fn))) * scale
                for v in vals]

    want = sum(p * q for p, q in zip(quantised(a_vals), quantised(b_vals)))
    assert want == Fraction(3.5) - Fraction(40, 128) * 2 - Fraction(1, 2) + Fraction(3, 16)
    assert Fraction(got) == want


def test_recipe_options_are_checked():
    cases = [({"gemm": "mxfp9", "tensor_core": "b200"},
              r"^gemm: unknown recipe 'mxfp9'; accepted: mxfp8, mxfp6, mxfp4, nvfp4, fp8_tensorwise, fp8_rowwise$"),
             ({"gemm": "mxfp8", "tensor_core": "h100"},
              r"^tensor_core: h100 \(hopper\) has no block-scaled instruction for gemm='mxfp8' \(e4m3 x e4m3, e8m0 "
              r"scales per 32\); blackwell, rtx_blackwell have them$"),
             ({"gemm": "mxfp8", "tensor_core": PRESETS["mxfp8"], "grad_format": "e5m2"},
              r"^tensor_core: .*e4m3\.e4m3\.ue8m0 cannot run gemm='mxfp8' \((e5m2 x e4m3|e4m3 x e5m2)"),
             ({"gemm": "fp8_rowwise", "tensor_core": "a100"}, r"^tensor_core: a100 \(ampere\) has no instruction for "
                                                             r"fp8_e4m3fn x fp8_e4m3fn -> fp32"),
             ({"gemm": "mxfp8"}, r"^tensor_core: gemm='mxfp8' runs on a GPU's matrix unit: name one"),
             ({"scale_rule": "rceil"}, r"^scale_rule: a low-precision GEMM option; it needs a recipe, gemm="),
             ({"grad_format": "e5m2"}, r"^grad_format: a low-precision GEMM option"),
             ({"gemm": "nvfp4", "tensor_core": "b200", "scale_rule": "floor"}, r"^scale_rule: nvfp4 has no scale rule"),
             ({"gemm": "mxfp4", "tensor_core": "b200", "grad_format": "e5m2"},
              r"^grad_format: mxfp4 takes gradients in e2m1, got 'e5m2'$"),
             ({"gemm": "mxfp8", "tensor_core": "b200", "grad_rounding": "sr"}, r"^seed: grad_rounding='sr'"),
             ({"gemm": "mxfp8", "tensor_core": "b200", "seed": 1}, r"^seed: 1 would be unused")]
    for options, match in cases:
        with pytest.raises(ValueError, match=match):
            sft.emulate(**options)
    x = torch.ones(2, 32, dtype=torch.float8_e4m3fn)
    with pytest.raises(EmulationError, match=r"^gemm='mxfp8': a matmul operand of torch.float8_e4m3fn; the recipe "
                                             r"quantises float32, bfloat16 and float16 operands$"):
        with sft.emulate(gemm="mxfp8", tensor_core="b200"):
            x @ x.T


def test_a_trace_keeps_the_recipe_and_replays_under_it(tmp_path):
    x, w = operands(m=4, k=32, n=8, seed=8)
    with sft.emulate(gemm="mxfp6", tensor_core="b200", grad_format="e3m2"), record(tmp_path / "t.npz"):
        x @ w.T
    stored = load_trace(tmp_path / "t.npz").settings["machine"]
    assert {k: stored[k] for k in ("gemm", "scale_rule", "grad_format", "grad_rounding", "tensor_core")} == {
        "gemm": "mxfp6", "scale_rule": "floor", "grad_format": "e3m2", "grad_rounding": "rne", "tensor_core": "b200"}
    recipe = machine_from_settings({"machine": stored}).recipe
    assert (recipe.name, recipe.grad) == ("mxfp6", "fp6_e3m2")
