"""softfloat16.torch on attention and a whole nn.TransformerEncoderLayer: the flash-attention op
against a numpy float32 step-by-step oracle of its documented definition and against native
torch; the layer in train mode (forward and backward, dropout on) strict, deterministic across
runs and thread counts, and close to the same layer in native float32; the eval-mode fast path."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16 as sf  # noqa: E402
import softfloat16.torch as sft  # noqa: E402
from softfloat16 import fp32math  # noqa: E402
from softfloat16.torch.registry import IMPLEMENTATIONS  # noqa: E402
from test_torch_normalization import mismatches, relative_error  # noqa: E402

HALVES = [torch.float16, torch.bfloat16]
aten = torch.ops.aten
f32 = np.float32


def assert_same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    count = mismatches(got, want)
    assert count == 0, f"{what}: {count} of {got.numel()} elements differ"


def gaussian(*shape, dtype, seed, scale=1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator) * scale).to(dtype)


@pytest.fixture(autouse=True)
def quiet_numpy():
    with np.errstate(all="ignore"):
        yield


# -- the flash-attention op against its definition --------------------------------------------------------
def wide(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy().astype(f32)


def rounded(values: np.ndarray, dtype) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values, dtype=f32)).to(dtype)


def exp32(x: np.ndarray) -> np.ndarray:
    return np.asarray(fp32math.exp(x.astype(f32).view(np.uint32))).view(f32)


def log32(x: np.ndarray) -> np.ndarray:
    return np.asarray(fp32math.log(x.astype(f32).view(np.uint32))).view(f32)


def kloop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched a @ b, k ascending from +0, each product exact (FP16/BF16 values, FP32 products of
    them) and each addition a float32 rounding."""
    total = np.zeros(a.shape[:-1] + b.shape[-1:], f32)
    for k in range(a.shape[-1]):
        total = (total + (a[..., :, k, None] * b[..., None, k, :]).astype(f32)).astype(f32)
    return total


def row_sum(x: np.ndarray) -> np.ndarray:
    total = np.zeros(x.shape[:-1], f32)
    for j in range(x.shape[-1]):
        total = (total + x[..., j]).astype(f32)
    return total


def scores_oracle(q, k, mask, causal):
    scale = f32(1 / math.sqrt(q.shape[-1]))
    scores = (kloop(wide(q), np.swapaxes(wide(k), -1, -2)) * scale).astype(f32)
    if mask is not None:
        addend = np.where(mask.numpy(), f32(0), f32(-np.inf)) if mask.dtype == torch.bool else wide(mask)
        scores = (scores + addend).astype(f32)
    if causal:
        scores = np.where(np.triu(np.ones(scores.shape[-2:], bool), 1), f32(-np.inf), scores)
    return scores, scale


def attention_oracle(q, k, v, mask=None, causal=False):
    """(output, logsumexp) per attention.py's docstring, in numpy float32 steps."""
    scores, _ = scores_oracle(q, k, mask, causal)
    top = scores.max(axis=-1, keepdims=True)
    exps = exp32((scores - top).astype(f32))
    total = row_sum(exps)[..., None]
    probabilities = wide(rounded(exps, q.dtype))
    out = (kloop(probabilities, wide(v)) / total).astype(f32)
    return rounded(out, q.dtype), torch.from_numpy((top[..., 0] + log32(total[..., 0])).astype(f32))


def attention_backward_oracle(grad, q, k, v, out, lse, mask=None, causal=False):
    scores, scale = scores_oracle(q, k, mask, causal)
    p = exp32((scores - wide(lse)[..., None]).astype(f32))
    dtype = q.dtype
    p_rounded = wide(rounded(p, dtype))
    dv = kloop(np.swapaxes(p_rounded, -1, -2), wide(grad))
    dp = kloop(wide(grad), np.swapaxes(wide(v), -1, -2))
    correction = row_sum((wide(grad) * wide(out)).astype(f32))[..., None]
    ds = wide(rounded((p * (dp - correction).astype(f32)).astype(f32), dtype))
    dq = (kloop(ds, wide(k)) * scale).astype(f32)
    dk = (kloop(np.swapaxes(ds, -1, -2), wide(q)) * scale).astype(f32)
    return rounded(dq, dtype), rounded(dk, dtype), rounded(dv, dtype)


def attention_inputs(dtype, seed=0, length=6, source=7):
    q = gaussian(2, 2, length, 8, dtype=dtype, seed=seed, scale=2.0)
    k = gaussian(2, 2, source, 8, dtype=dtype, seed=seed + 1, scale=2.0)
    v = gaussian(2, 2, source, 8, dtype=dtype, seed=seed + 2)
    return q, k, v


@pytest.mark.parametrize("masking", ["none", "float mask", "bool mask", "causal"])
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_flash_attention_is_its_fp32_definition(dtype, masking):
    q, k, v = attention_inputs(dtype)
    mask = None
    if masking == "float mask":
        mask = gaussian(6, 7, dtype=dtype, seed=9)
        mask[1, :] = float("-inf")  # a row with nothing to attend to
    elif masking == "bool mask":
        mask = torch.from_numpy(np.random.default_rng(10).random((2, 1, 6, 7)) < 0.7)
        mask[..., 0] = True
    causal = masking == "causal"
    grad = gaussian(2, 2, 6, 8, dtype=dtype, seed=11)
    with sft.emulate() as mode:
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=causal, attn_mask=mask)
        grads = aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, out, lse, 0.0, causal,
                                                                          attn_mask=mask)
    assert not mode.fallbacks
    want_out, want_lse = attention_oracle(q, k, v, mask, causal)
    if masking == "float mask":  # the fully masked row: zeros and logsumexp 0, as torch's kernel
        want_out[:, :, 1] = 0
        want_lse[:, :, 1] = 0
        native_out, native_lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=mask)
        assert (native_out[:, :, 1] == 0).all() and (native_lse[:, :, 1] == 0).all()
    assert_same(out, want_out, f"{dtype} {masking} output")
    assert_same(lse, want_lse, f"{dtype} {masking} logsumexp")
    for name, got, want in zip("qkv", grads, attention_backward_oracle(grad, q, k, v, out, lse, mask, causal)):
        assert_same(got, want, f"{dtype} {masking} d{name}")


# Measured against torch 2.13's CPU flash kernel (its exp is a 20-bit approximation, it multiplies
# by 1/sum and blocks the softmax online): outputs differ in 9-11% (float16) / 1.6-2% (bfloat16)
# of elements by one unit in the last place; gradients by at most 8e-4 (float16) / 5e-3
# (bfloat16) relative to their largest element; float32 outputs and gradients within 2e-6.
NATIVE_ATTENTION_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5}


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
def test_flash_attention_close_to_native_torch(dtype):
    q, k, v = attention_inputs(dtype, seed=20, length=16, source=20)
    grad = gaussian(2, 2, 16, 8, dtype=dtype, seed=23)
    with sft.emulate():
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)
        grads = aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, out, lse, 0.0, True)
    native_out, native_lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)
    native_grads = aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, native_out, native_lse,
                                                                             0.0, True)
    bound = NATIVE_ATTENTION_BOUND[dtype]
    assert relative_error(out, native_out) <= bound
    assert (lse - native_lse).abs().max().item() <= 2e-4
    for got, want in zip(grads, native_grads):
        assert relative_error(got, want) <= bound
    if dtype != torch.float32:
        assert mismatches(out, native_out) <= out.numel() // 5


def test_attention_refusals_are_named():
    q, k, v = attention_inputs(torch.float16)
    with sft.emulate(), pytest.raises(sft.NotEmulatedError, match="dropout_p > 0"):
        aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.1)
    with sft.emulate(), pytest.raises(sft.NotEmulatedError, match="dtypes"):
        aten._scaled_dot_product_flash_attention_for_cpu(q, k, v.float())


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_safe_softmax_zeroes_fully_masked_rows(dtype):
    x = gaussian(4, 5, dtype=dtype, seed=30, scale=3.0)
    x[2] = float("-inf")
    with sft.emulate() as mode:
        got = aten._safe_softmax(x, 1)
        widened = aten._safe_softmax(x, -1, dtype=torch.float32)
        plain = torch.softmax(x, 1)
    assert not mode.fallbacks
    assert (got[2] == 0).all() and not (got[2].signbit()).any()
    assert_same(got[[0, 1, 3]], plain[[0, 1, 3]], "safe softmax elsewhere is the softmax")
    assert widened.dtype == torch.float32 and (widened[2] == 0).all()
    assert mismatches(got, aten._safe_softmax(x, 1)) <= 2


# -- nn.TransformerEncoderLayer ---------------------------------------------------------------------------
def make_layer(dtype, activation="relu", norm_first=False):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True, dropout=0.1,
                                             activation=activation, norm_first=norm_first)
    return layer.to(dtype)


def layer_inputs(dtype):
    return gaussian(3, 5, 16, dtype=dtype, seed=40), gaussian(3, 5, 16, dtype=dtype, seed=41)


def train_step(layer, x, target, emulated: bool, seed: int = 7):
    """Forward (train mode: dropout on) and backward of an MSE loss; (output, loss, input and
    parameter gradients)."""
    layer.train()
    layer.zero_grad()
    x = x.detach().clone().requires_grad_()
    torch.manual_seed(seed)  # the dropout masks
    if emulated:
        with sft.emulate(strict=True) as mode:
            out = layer(x)
            loss = torch.nn.functional.mse_loss(out, target)
            loss.backward()
        assert not mode.fallbacks
    else:
        out = layer(x)
        loss = torch.nn.functional.mse_loss(out, target)
        loss.backward()
    grads = [x.grad] + [p.grad for p in layer.parameters()]
    return out.detach(), loss.detach(), [g.clone() for g in grads]


# Measured: the largest relative error (max |error| / max |reference| per tensor) of the emulated
# FP16/BF16 layer against the same layer in native float32 (same weights, inputs and dropout
# masks): output 6.2e-4 / 3.7e-3, loss 1.1e-4 / 8.8e-4, worst gradient 1.1e-3 / 1.2e-2 for
# float16 / bfloat16 -- the same as native torch's own float16 / bfloat16 layer shows (whose
# results differ from the mode's in 156 / 29 of these 2,705 elements, by an ulp or so).
NATIVE_FP32_BOUND = {torch.float16: 4e-3, torch.bfloat16: 3e-2}


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_encoder_layer_trains_strictly_deterministically_and_close_to_fp32(dtype):
    layer = make_layer(dtype)
    x, target = layer_inputs(dtype)
    first = train_step(layer, x, target, emulated=True)
    try:
        sf.set_num_threads(1)
        one_thread = train_step(layer, x, target, emulated=True)
        sf.set_num_threads(2)
        two_threads = train_step(layer, x, target, emulated=True)
    finally:
        sf.set_num_threads(None)
    for run in (one_thread, two_threads):
        assert_same(run[0], first[0], "output")
        assert_same(run[1], first[1], "loss")
        for got, want in zip(run[2], first[2]):
            assert_same(got, want, "gradient")
    reference = make_layer(torch.float32)
    reference.load_state_dict({name: value.float() for name, value in layer.state_dict().items()})
    native = train_step(reference, x.float(), target.float(), emulated=False)
    worst = max([relative_error(first[0], native[0]), relative_error(first[1], native[1])]
                + [relative_error(got, want) for got, want in zip(first[2], native[2])])
    assert worst <= NATIVE_FP32_BOUND[dtype], worst
    assert relative_error(first[0], native[0]) <= NATIVE_FP32_BOUND[dtype] / 4


@pytest.fixture
def count_fast_path(monkeypatch):
    """Calls of the emulated _transformer_encoder_layer_fwd (the fused eval-mode op)."""
    packet = aten._transformer_encoder_layer_fwd
    original = IMPLEMENTATIONS[packet]
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setitem(IMPLEMENTATIONS, packet, counting)
    return calls


@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "causal mask"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_eval_fast_path_equals_the_op_by_op_layer(dtype, norm_first, masked, count_fast_path):
    layer = make_layer(dtype, norm_first=norm_first).eval()
    x, _ = layer_inputs(dtype)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=dtype) if masked else None
    with torch.no_grad(), sft.emulate(strict=True) as mode:
        fused = layer(x, src_mask=mask)
    assert not mode.fallbacks and count_fast_path == [1]
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), sft.emulate(strict=True):
            op_by_op = layer(x, src_mask=mask)
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)
    assert count_fast_path == [1]
    assert_same(fused, op_by_op, "fast path")
    native = layer(x, src_mask=mask).detach()
    assert relative_error(fused, native) <= NATIVE_FP32_BOUND[dtype] / 4


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_multihead_attention_without_weights_uses_the_flash_op(dtype):
    torch.manual_seed(1)
    attention = torch.nn.MultiheadAttention(16, 2, batch_first=True).to(dtype)
    x = gaussian(2, 6, 16, dtype=dtype, seed=50).requires_grad_()
    mask = torch.nn.Transformer.generate_square_subsequent_mask(6, dtype=dtype)
    with sft.emulate(strict=True) as mode:
        out, _ = attention(x, x, x, need_weights=False, attn_mask=mask)
        out.backward(torch.ones_like(out))
    assert not mode.fallbacks
    grad, x.grad = x.grad, None
    native, _ = attention(x, x, x, need_weights=False, attn_mask=mask)
    native.backward(torch.ones_like(native))
    assert relative_error(out, native) <= NATIVE_FP32_BOUND[dtype] / 4
    assert relative_error(grad, x.grad) <= NATIVE_FP32_BOUND[dtype]


def test_encoder_layer_with_gelu():
    if aten.gelu not in IMPLEMENTATIONS:
        pytest.skip("gelu is not emulated yet (softfloat16/torch/activations.py)")
    layer = make_layer(torch.float16, activation="gelu")
    x, target = layer_inputs(torch.float16)
    first = train_step(layer, x, target, emulated=True)
    second = train_step(layer, x, target, emulated=True)
    for got, want in zip(first[2], second[2]):
        assert_same(got, want, "gelu layer gradient")
    with torch.no_grad(), sft.emulate(strict=True) as mode:
        layer.eval()(x)
    assert not mode.fallbacks
