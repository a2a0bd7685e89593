"""Attention on the emulator: torch's CPU flash-attention op (forward and backward), the safe
softmax of the math path, and the eval-mode fast path of ``nn.TransformerEncoderLayer``.

``F.scaled_dot_product_attention`` (and ``nn.MultiheadAttention`` with ``need_weights=False``)
reaches the mode as ``aten._scaled_dot_product_flash_attention_for_cpu`` when it has no dropout;
with dropout (training) torch takes the math path, whose ops (scalings, ``bmm``,
``_safe_softmax``, ``bernoulli_``, ...) arrive one by one. The flash op is computed as the math
decomposition with FP32 intermediates, rounding where a flash kernel rounds (torch's CPU kernel
and GPU FlashAttention alike: the probabilities enter the second matmul in the input's format):

1. ``S = (Q @ K^T) * scale`` (the matmul accumulated as the machine's matmuls are, in FP32;
   ``scale`` = ``1/sqrt(E)`` computed in double, then a float32), ``+ mask`` (a float mask added in
   FP32; a bool mask puts -inf where it is False), ``-inf`` above the diagonal for ``is_causal``;
2. ``m = max_j S``, ``e = exp(S - m)`` (the emulated FP32 exp), ``l = sum_j e`` (FP32, the
   machine's order);
3. ``P = e`` rounded once into the input's format; ``O = (P @ V) / l`` (FP32 accumulation, one
   FP32 division), rounded once; ``logsumexp = m + log(l)`` in FP32 (returned as float32).
   A row with every score -inf gives ``O = +0`` and ``logsumexp = +0``, as torch's kernel.

Backward, from the saved ``O`` and ``logsumexp``: ``P = exp(S - logsumexp)`` (FP32),
``dV = round(P) ^T @ dO``, ``dP = dO @ V^T`` (FP32), ``D = sum_j dO * O`` (FP32),
``dS = P * (dP - D)`` (FP32) rounded into the format, ``dQ = (dS @ K) * scale``,
``dK = (dS^T @ Q) * scale``; each gradient rounded once.

Grouped-query attention (key and value with ``H / g`` heads for the query's ``H``, torch's
``enable_gqa``): query head ``h`` reads key/value head ``h // g``; the ``dK`` and ``dV`` of a
key/value head are one FP32 accumulation over the rows of its ``g`` query heads (head by head, rows
in order), rounded once.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .machine import FP32, Machine
from .linear import accumulate_products
from .operands import meta_layouts, unary_shape
from .opmath import ARITHMETIC, constant32, sum32, widen32
from .reductions import row_extreme
from .registry import NotEmulated, NotEmulatedError, aten, aten_arg, emulation, implements
from .softmax import exp32, log32, softmax
from .tensors import DTYPE_FORMATS, bits, from_bits, is_emulated, laid_out

__all__ = ["attention_scores32"]

_NEG_INF32 = np.uint32(0xFF800000)
_ZERO32 = np.uint32(0)


@implements("_safe_softmax", inplace=False)
def safe_softmax(machine, func, args, kwargs):
    """``softmax`` (the mode's, after converting to ``dtype`` if given), with +0 for every row
    whose inputs are all -inf (torch's ``_safe_softmax``, used by the math attention path)."""
    x, dim, dtype = args[0], aten_arg(args, kwargs, 1, "dim"), aten_arg(args, kwargs, 2, "dtype")
    if not is_emulated(x.dtype) or (dtype is not None and not is_emulated(dtype)):
        return func(*args, **kwargs)
    if dtype is not None and dtype != x.dtype:
        x = machine.convert(x, dtype)
    result = softmax(machine, aten._softmax.default, (x, dim, False), {})
    fmt = DTYPE_FORMATS[x.dtype]
    negative_infinity = torch.from_numpy(bits(x) == fmt.dtype(fmt.sign_mask | fmt.inf))
    masked_rows = negative_infinity.all(dim=dim, keepdim=True) if x.dim() else negative_infinity
    return torch.where(masked_rows, torch.zeros((), dtype=result.dtype), result)


# -- scaled dot-product attention -----------------------------------------------------------------------
def _scale32(scale, head_size: int) -> np.uint32:
    """The softmax scale as torch's kernel holds it: the given double, or 1/sqrt(E) in double,
    converted to float32."""
    return constant32(1.0 / math.sqrt(head_size) if scale is None else scale)


def _groups(tensor: torch.Tensor) -> torch.Tensor:
    """(..., rows, columns) -> (groups, rows, columns), the leading dimensions flattened."""
    return tensor.reshape(-1, tensor.shape[-2], tensor.shape[-1])


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, op: str) -> int:
    """Validates the operands; returns how many query heads share one key/value head (1 unless
    grouped-query attention: query (..., H, L, E), key and value (..., H / g, S, E))."""
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in ARITHMETIC:
        raise NotEmulated(f"{op}: query, key, value of dtypes {q.dtype}, {k.dtype}, {v.dtype} (emulated: one of "
                          "float16, bfloat16, float32 for all three)")
    shared = 1
    if q.dim() >= 3 and k.dim() == v.dim() == q.dim() and k.shape[:-2] == v.shape[:-2] \
            and q.shape[:-3] == k.shape[:-3] and 0 < k.shape[-3] < q.shape[-3] and q.shape[-3] % k.shape[-3] == 0:
        shared = q.shape[-3] // k.shape[-3]
    if q.dim() < 2 or not (shared > 1 or q.shape[:-2] == k.shape[:-2] == v.shape[:-2]) or k.shape[-2] != v.shape[-2] \
            or q.shape[-1] != k.shape[-1]:
        raise NotEmulated(f"{op}: shapes query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)} "
                          "(expected (..., L, E), (..., S, E), (..., S, Ev) with equal leading dimensions, or "
                          "key and value heads (dimension -3) dividing the query's)")
    return shared


def _share_heads(tensor: torch.Tensor, shared: int) -> torch.Tensor:
    """Grouped-query attention: each key/value head repeated for the ``shared`` query heads that
    read it (query head h reads key head h // shared, torch's ``enable_gqa``)."""
    return tensor if shared == 1 else tensor.repeat_interleave(shared, dim=-3)


def _mask32(machine: Machine, mask: torch.Tensor, shape: tuple, op: str) -> np.ndarray:
    """An attention mask as FP32 addends of the scores' shape: a float mask widened, a bool mask
    as 0 where True (attend) and -inf where False."""
    try:
        mask = mask.expand(shape)
    except RuntimeError as error:
        raise NotEmulated(f"{op}: attn_mask of shape {tuple(mask.shape)} does not broadcast to {shape}") from error
    if mask.dtype == torch.bool:
        return np.where(mask.contiguous().numpy(), _ZERO32, _NEG_INF32)
    return widen32(machine, mask, op, "attn_mask")


def attention_scores32(machine: Machine, q: torch.Tensor, k: torch.Tensor, scale, attn_mask, is_causal: bool,
                       op: str = "attention") -> tuple[np.ndarray, np.uint32]:
    """FP32 scores ``(Q @ K^T) * scale (+ mask)`` of shape (groups, L, S), and the FP32 scale.

    >>> q = torch.tensor([[[1.0, 0.0]]], dtype=torch.float16); k = torch.tensor([[[2.0, 0.0]]], dtype=torch.float16)
    >>> scores, scale = attention_scores32(Machine(), q, k, None, None, False)
    >>> float(np.asarray(scores, np.uint32).view(np.float32)[0, 0, 0])     # 2 / sqrt(2)
    1.4142135381698608
    """
    qs, ks = _groups(q), _groups(k)
    length, source = qs.shape[1], ks.shape[1]
    scale32 = _scale32(scale, q.shape[-1])
    scores = np.empty((qs.shape[0], length, source), np.uint32)
    for group in range(qs.shape[0]):
        scores[group] = machine.mul(accumulate_products(machine, qs[group], ks[group].t()), scale32)
    if attn_mask is not None:
        addends = _mask32(machine, attn_mask, tuple(q.shape[:-1]) + (source,), op).reshape(scores.shape)
        scores = np.asarray(machine.add(scores, addends))
    if is_causal:  # top-left aligned: query i sees keys 0..i, as torch's kernels
        above = np.triu(np.ones((length, source), bool), 1)
        scores = np.where(above, _NEG_INF32, scores)
    return scores, scale32


def _flash_args(args, kwargs):
    dropout_p = aten_arg(args, kwargs, 3, "dropout_p", 0.0)
    is_causal = aten_arg(args, kwargs, 4, "is_causal", False)
    return dropout_p, is_causal, kwargs.get("attn_mask"), kwargs.get("scale")


@implements("_scaled_dot_product_flash_attention_for_cpu", inplace=False)
def flash_attention(machine, func, args, kwargs):
    """Scaled dot-product attention (torch's CPU flash op): the math decomposition with FP32
    scores, softmax statistics and accumulators, the probabilities rounded into the input's format
    before the second matmul (module docstring). Returns (output, logsumexp as float32)."""
    q, k, v = args[0], args[1], args[2]
    if not is_emulated(q.dtype):
        return func(*args, **kwargs)
    op = "_scaled_dot_product_flash_attention_for_cpu"
    shared = _check(q, k, v, op)
    k, v = _share_heads(k, shared), _share_heads(v, shared)
    dropout_p, is_causal, attn_mask, scale = _flash_args(args, kwargs)
    if dropout_p > 0:
        raise NotEmulated(f"{op} with dropout_p > 0 (torch's CPU flash kernel has no dropout either: with dropout, "
                          "F.scaled_dot_product_attention takes the math path, whose ops are emulated)")
    fmt = DTYPE_FORMATS[q.dtype]
    scores, _ = attention_scores32(machine, q, k, scale, attn_mask, is_causal, op)
    groups, length, source = scores.shape
    rows = scores.reshape(-1, source)
    if source == 0:
        raise NotEmulated(f"{op} with no keys")
    top = row_extreme(machine, rows, FP32, largest=True)
    masked = top == _NEG_INF32  # every score -inf: torch's kernel writes zeros and logsumexp 0
    exps = np.asarray(exp32(machine.sub(rows, top[:, None])))
    exps[masked] = _ZERO32
    total = sum32(machine, exps)
    probabilities = from_bits(machine.narrow(exps, fmt), q.dtype, (groups, length, source))
    vs = _groups(v)
    out = np.empty((groups, length, v.shape[-1]), np.uint32)
    for group in range(groups):
        out[group] = accumulate_products(machine, probabilities[group], vs[group])
    out = np.asarray(machine.div(out.reshape(groups * length, -1), total[:, None]))
    out[masked] = _ZERO32
    logsumexp = np.where(masked, _ZERO32, machine.add(top, log32(total)))
    # torch CPU's layouts (measured; its meta kernel differs): the output laid out as the query (as
    # empty_like), logsumexp a (batch, length, heads) buffer transposed.
    if q.dim() == 4 and v.shape[-1] == q.shape[-1]:
        batch, heads, length = q.shape[:3]
        layouts = [unary_shape(q), laid_out(q.shape[:3], (length * heads, 1, heads))]
    else:
        layouts = meta_layouts(func, args, kwargs)
    return (from_bits(machine.narrow(out, fmt), q.dtype, layouts[0]), from_bits(logsumexp, torch.float32, layouts[1]))


@implements("_scaled_dot_product_flash_attention_for_cpu_backward", inplace=False)
def flash_attention_backward(machine, func, args, kwargs):
    """Gradients of :func:`flash_attention` from its saved output and logsumexp (module
    docstring): P recomputed in FP32, ``dS = P * (dO @ V^T - sum(dO * O))`` rounded into the
    format, each of dQ, dK, dV accumulated in FP32 and rounded once."""
    grad_out, q, k, v, out, logsumexp = args[:6]
    if not is_emulated(q.dtype):
        return func(*args, **kwargs)
    op = "_scaled_dot_product_flash_attention_for_cpu_backward"
    shared = _check(q, k, v, op)
    key, value = k, v
    k, v = _share_heads(k, shared), _share_heads(v, shared)
    dropout_p = aten_arg(args, kwargs, 6, "dropout_p", 0.0)
    is_causal = aten_arg(args, kwargs, 7, "is_causal", False)
    attn_mask, scale = kwargs.get("attn_mask"), kwargs.get("scale")
    if dropout_p > 0:
        raise NotEmulated(f"{op} with dropout_p > 0")
    if grad_out.dtype != q.dtype or out.dtype != q.dtype:
        raise NotEmulated(f"{op}: grad_out {grad_out.dtype} and out {out.dtype} next to query {q.dtype}")
    fmt = DTYPE_FORMATS[q.dtype]
    scores, scale32 = attention_scores32(machine, q, k, scale, attn_mask, is_causal, op)
    groups, length, source = scores.shape
    lse = widen32(machine, logsumexp.float() if logsumexp.dtype != torch.float32 else logsumexp, op,
                  "logsumexp").reshape(-1, 1)
    p32 = np.asarray(exp32(machine.sub(scores.reshape(-1, source), lse))).reshape(groups, length, source)
    probabilities = from_bits(machine.narrow(p32, fmt), q.dtype, p32.shape)
    dos, qs, ks, vs = _groups(grad_out), _groups(q), _groups(k), _groups(v)
    # D = rowsum(dO * O), the softmax backward's correction term, in FP32.
    correction = sum32(machine, machine.mul(widen32(machine, dos, op, "grad_out").reshape(groups * length, -1),
                                            widen32(machine, _groups(out), op, "out").reshape(groups * length, -1)))
    correction = correction.reshape(groups, length, 1)
    grad_q = np.empty(tuple(qs.shape), np.uint32)
    score_grads = []
    for group in range(groups):
        dp = accumulate_products(machine, dos[group], vs[group].t())
        ds = machine.mul(p32[group], machine.sub(dp, correction[group]))
        ds = from_bits(machine.narrow(np.asarray(ds), fmt), q.dtype, (length, source))
        grad_q[group] = machine.mul(accumulate_products(machine, ds, ks[group]), scale32)
        score_grads.append(ds)
    # dK and dV of a key/value head: one accumulation over the rows of every query head reading it
    # (head by head, rows in order), one rounding.
    key_groups = groups // shared
    grad_k = np.empty((key_groups, source, k.shape[-1]), np.uint32)
    grad_v = np.empty((key_groups, source, v.shape[-1]), np.uint32)
    for group in range(key_groups):
        readers = range(group * shared, (group + 1) * shared)
        ds_t = torch.cat([score_grads[index].t() for index in readers], dim=1)
        grad_k[group] = machine.mul(accumulate_products(machine, ds_t, torch.cat([qs[i] for i in readers])), scale32)
        p_t = torch.cat([probabilities[index].t() for index in readers], dim=1)
        grad_v[group] = accumulate_products(machine, p_t, torch.cat([dos[index] for index in readers]))
    layouts = meta_layouts(func, args, kwargs)  # torch's layouts (its meta kernel's, measured)
    return tuple(from_bits(machine.narrow(grad, fmt), q.dtype, layout if tuple(layout) == tuple(t.shape) else t.shape)
                 for grad, t, layout in zip((grad_q, grad_k, grad_v), (q, key, value), layouts))


# -- nn.TransformerEncoderLayer's eval-mode fast path -------------------------------------------------------
_ENCODER_ARGS = ("src", "embed_dim", "num_heads", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "use_gelu",
                 "norm_first", "eps", "norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2",
                 "ffn_weight_1", "ffn_bias_1", "ffn_weight_2", "ffn_bias_2", "mask", "mask_type")


def _additive_mask(machine: Machine, mask, mask_type, batch: int, length: int, dtype) -> torch.Tensor | None:
    """The fused op's mask (True or -inf: masked out; type 0: (L, L), 1: key padding (B, L),
    2: (B, H, L, L)) as a float mask of ``dtype`` to add to the scores."""
    if mask is None:
        return None
    if mask_type == 1:
        mask = mask.reshape(batch, 1, 1, length)
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))
    return mask if mask.dtype == dtype else machine.convert(mask, dtype)


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``x @ weight.T + bias`` as ``nn.Linear`` reaches the mode (``addmm`` on the flattened rows)."""
    rows = x.reshape(-1, x.shape[-1])
    out = aten.mm(rows, weight.t()) if bias is None else aten.addmm(bias, rows, weight.t())
    return out.reshape(*x.shape[:-1], weight.shape[0])


def _encoder_layer_steps(machine: Machine, p: dict) -> torch.Tensor:
    """The layer as its training-mode code computes it without dropout, written with the aten ops
    that code reaches the mode with (below autograd, composite ops such as ``linear`` are not
    decomposed by torch, so they are spelled out here). Runs under an emulation mode."""
    src, width, heads = p["src"], int(p["embed_dim"]), int(p["num_heads"])
    batch, length = src.shape[0], src.shape[1]
    mask = _additive_mask(machine, p["mask"], p["mask_type"], batch, length, src.dtype)

    def split(t):
        return t.reshape(batch, length, heads, width // heads).transpose(1, 2)

    def self_attention(x):
        q, k, v = _linear(x, p["qkv_weight"], p["qkv_bias"]).split(width, dim=-1)
        attended = aten._scaled_dot_product_flash_attention_for_cpu(split(q), split(k), split(v), attn_mask=mask)[0]
        return _linear(attended.transpose(1, 2).reshape(batch, length, width), p["proj_weight"], p["proj_bias"])

    def feed_forward(x):
        hidden = _linear(x, p["ffn_weight_1"], p["ffn_bias_1"])
        hidden = aten.gelu(hidden) if p["use_gelu"] else aten.relu(hidden)
        return _linear(hidden, p["ffn_weight_2"], p["ffn_bias_2"])

    def norm(x, index):
        return aten.native_layer_norm(x, [width], p[f"norm_weight_{index}"], p[f"norm_bias_{index}"], p["eps"])[0]

    x = src
    if p["norm_first"]:
        x = aten.add(x, self_attention(norm(x, 1)))
        return aten.add(x, feed_forward(norm(x, 2)))
    x = norm(aten.add(x, self_attention(x)), 1)
    return norm(aten.add(x, feed_forward(x)), 2)


@implements("_transformer_encoder_layer_fwd", inplace=False)
def transformer_encoder_layer(machine, func, args, kwargs):
    """``nn.TransformerEncoderLayer``'s fused eval-mode op, decomposed into the ops its
    training-mode code runs (linear, scaled dot-product attention, residual adds, layer norms,
    relu or gelu), each emulated: the same definition as a training-mode forward without
    dropout. Nested-tensor inputs (a key-padding mask on the fast path) are not emulated."""
    p = {name: aten_arg(args, kwargs, index, name) for index, name in enumerate(_ENCODER_ARGS)}
    src = p["src"]
    if not is_emulated(src.dtype):
        return func(*args, **kwargs)
    if src.is_nested or src.dim() != 3:
        raise NotEmulated("_transformer_encoder_layer_fwd of a nested tensor (src_key_padding_mask on the fast "
                          "path); torch.backends.mha.set_fastpath_enabled(False) runs the layer op by op")
    try:
        with emulation(machine):
            return _encoder_layer_steps(machine, p)
    except NotEmulatedError as error:
        raise NotEmulated(f"its decomposition needs an op that is not emulated ({error})") from error
