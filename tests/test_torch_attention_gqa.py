"""Grouped-query attention (key and value with fewer heads than the query: Llama, Mixtral) in the
flash-attention op, against the numpy float32 step oracle of tests/test_torch_transformer.py with
each key/value head repeated for its query heads, and the key/value gradients accumulated over the
stacked rows of those heads; and close to native torch CPU's kernel."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16.torch as sft  # noqa: E402
from test_torch_normalization import relative_error  # noqa: E402
from test_torch_transformer import (  # noqa: E402
    HALVES, assert_same, attention_oracle, exp32, f32, gaussian, kloop, rounded, row_sum, scores_oracle, wide)

aten = torch.ops.aten
SHARED = 2  # query heads per key/value head


@pytest.fixture(autouse=True)
def quiet_numpy():
    with np.errstate(all="ignore"):
        yield


def gqa_inputs(dtype, seed=30):
    q = gaussian(2, 4, 6, 8, dtype=dtype, seed=seed, scale=2.0)
    k = gaussian(2, 2, 7, 8, dtype=dtype, seed=seed + 1, scale=2.0)
    v = gaussian(2, 2, 7, 8, dtype=dtype, seed=seed + 2)
    return q, k, v


def stacked(x: np.ndarray) -> np.ndarray:
    """(B, H, L, X) -> (B, H / SHARED, SHARED * L, X): the rows of the query heads sharing a key head."""
    b, h, length, width = x.shape
    return x.reshape(b, h // SHARED, SHARED * length, width)


def gqa_backward_oracle(grad, q, k, v, out, lse, causal):
    k_rep, v_rep = k.repeat_interleave(SHARED, 1), v.repeat_interleave(SHARED, 1)
    scores, scale = scores_oracle(q, k_rep, None, causal)
    p = exp32((scores - wide(lse)[..., None]).astype(f32))
    p_rounded = wide(rounded(p, q.dtype))
    dp = kloop(wide(grad), np.swapaxes(wide(v_rep), -1, -2))
    correction = row_sum((wide(grad) * wide(out)).astype(f32))[..., None]
    ds = wide(rounded((p * (dp - correction).astype(f32)).astype(f32), q.dtype))
    dq = (kloop(ds, wide(k_rep)) * scale).astype(f32)
    dk = (kloop(np.swapaxes(stacked(ds), -1, -2), stacked(wide(q))) * scale).astype(f32)
    dv = kloop(np.swapaxes(stacked(p_rounded), -1, -2), stacked(wide(grad)))
    return rounded(dq, q.dtype), rounded(dk, q.dtype), rounded(dv, q.dtype)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_grouped_query_attention_is_its_fp32_definition(dtype, causal):
    q, k, v = gqa_inputs(dtype)
    grad = gaussian(2, 4, 6, 8, dtype=dtype, seed=40)
    with sft.emulate() as mode:
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=causal)
        grads = aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, out, lse, 0.0, causal)
    assert not mode.fallbacks
    want_out, want_lse = attention_oracle(q, k.repeat_interleave(SHARED, 1), v.repeat_interleave(SHARED, 1),
                                          causal=causal)
    assert_same(out, want_out, "output")
    assert_same(lse, want_lse, "logsumexp")
    assert [tuple(g.shape) for g in grads] == [tuple(q.shape), tuple(k.shape), tuple(v.shape)]
    for name, got, want in zip("qkv", grads, gqa_backward_oracle(grad, q, k, v, out, lse, causal)):
        assert_same(got, want, f"d{name}")


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_grouped_query_attention_close_to_native_torch(dtype):
    q, k, v = gqa_inputs(dtype, seed=50)
    grad = gaussian(2, 4, 6, 8, dtype=dtype, seed=53)
    with sft.emulate():
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)
        grads = aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, out, lse, 0.0, True)
    native_out, native_lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)
    native = aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, native_out, native_lse, 0.0,
                                                                       True)
    bound = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]  # test_torch_transformer's measured bounds
    assert relative_error(out, native_out) <= bound
    assert (lse - native_lse).abs().max().item() <= 2e-4
    for got, want in zip(grads, native):
        assert relative_error(got, want) <= bound


def test_key_heads_must_divide_the_query_heads():
    q, k, v = gaussian(1, 3, 4, 8, dtype=torch.float16, seed=1), *(gaussian(1, 2, 4, 8, dtype=torch.float16, seed=s)
                                                                   for s in (2, 3))
    with sft.emulate(), pytest.raises(sft.NotEmulatedError, match="dividing the query's"):
        aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
