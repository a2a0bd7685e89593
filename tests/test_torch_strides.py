"""softfloat16.torch: emulated results have the shape and the strides torch CPU gives them.

Oracle: native torch 2.13 CPU's own results on the same inputs (their ``stride()``), and, for a
TransformerEncoderLayer, the op list of a native trace, which an emulated trace must repeat op for op
(a result laid out differently makes torch copy where it viewed, or view where it copied).
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16.torch as sft  # noqa: E402
from softfloat16.torch.recording import load_trace, record  # noqa: E402
from softfloat16.torch.tensors import Strided, bits, from_bits, laid_out  # noqa: E402
from softfloat16.torch.trace_compare import compare_traces  # noqa: E402

F = torch.nn.functional
aten = torch.ops.aten


def layouts(dtype):
    """Inputs torch lays results out from: a transpose, channels-last, a permutation (dense, not
    contiguous: results copy their strides), an expanded and a sliced tensor (torch's results are
    contiguous)."""
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(6, 8, 5, generator=generator).to(dtype)
    image = torch.randn(2, 3, 4, 5, generator=generator).to(dtype)
    return {
        "transposed": base.transpose(0, 1),
        "channels_last": image.contiguous(memory_format=torch.channels_last),
        "permuted": base.permute(2, 0, 1),
        "expanded": torch.randn(8, 1, 5, generator=generator).to(dtype).expand(8, 6, 5),
        "sliced": base[:, ::2],
    }


OPS = {
    # unary
    "neg": torch.neg, "exp": torch.exp, "sqrt": lambda x: torch.sqrt(x.abs()), "reciprocal": torch.reciprocal,
    "to_float": lambda x: x.float(), "to_half": lambda x: x.half(),
    # binary: with itself, a scalar, a 0-dim tensor, a contiguous copy (the first operand's layout
    # wins), a broadcast bias
    "mul_scalar": lambda x: x * 3, "add_self": lambda x: x + x, "sub_contiguous": lambda x: x - x.contiguous(),
    "contiguous_div": lambda x: x.contiguous() / (x.abs() + 1),
    "bias": lambda x: x + torch.ones(x.shape[-1], dtype=x.dtype),
    "zero_dim": lambda x: x * torch.tensor(2.0, dtype=x.dtype), "maximum": lambda x: torch.maximum(x, -x),
    "pow": lambda x: x.abs() ** 1.5, "gt": lambda x: x > 0,
    # ternary
    "where": lambda x: torch.where(x > 0, x, x * 3), "addcmul": lambda x: torch.addcmul(x, x, x, value=0.5),
    "lerp": lambda x: torch.lerp(x, x.contiguous(), 0.3), "clamp": lambda x: x.clamp(-0.5, 0.5),
    # activations
    "relu": torch.relu, "gelu": F.gelu, "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    # reductions and normalizations
    "sum_dim": lambda x: x.sum(1), "mean_keepdim": lambda x: x.mean(-1, keepdim=True), "amax": lambda x: x.amax(0),
    "softmax": lambda x: x.softmax(-1), "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_emulated_results_have_torchs_strides(dtype):
    checked = 0
    for layout, x in layouts(dtype).items():
        for name, op in OPS.items():
            want = op(x)
            with sft.emulate():
                got = op(x)
            assert (got.shape, got.stride()) == (want.shape, want.stride()), f"{name} of a {layout} input"
            checked += not want.is_contiguous()
    assert checked >= 60  # most of them are laid out otherwise than contiguous


def test_flash_attention_batch_norm_and_group_norm_results_have_torchs_strides():
    generator = torch.Generator().manual_seed(1)
    qkv = torch.randn(2, 5, 48, generator=generator).to(torch.bfloat16)
    q, k, v = (t.view(2, 5, 2, 8).transpose(1, 2) for t in qkv.chunk(3, -1))  # as nn.MultiheadAttention
    for query in (q, q.contiguous()):
        want = aten._scaled_dot_product_flash_attention_for_cpu.default(query, k, v, 0.0)
        with sft.emulate():
            got = aten._scaled_dot_product_flash_attention_for_cpu.default(query, k, v, 0.0)
        assert [t.stride() for t in got] == [t.stride() for t in want]
        grads = [aten._scaled_dot_product_flash_attention_for_cpu_backward.default(
            want[0], query, k, v, want[0], want[1], 0.0, False)]
        with sft.emulate():
            grads.append(aten._scaled_dot_product_flash_attention_for_cpu_backward.default(
                want[0], query, k, v, want[0], want[1], 0.0, False))
        assert [t.stride() for t in grads[1]] == [t.stride() for t in grads[0]]
    x = torch.randn(2, 3, 4, 5, generator=generator).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    want = aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)[0]
    with sft.emulate():
        got = aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)[0]
    assert got.stride() == want.stride() == x.stride()
    want = aten.native_group_norm(x, None, None, 2, 3, 20, 3, 1e-5)
    with sft.emulate():
        got = aten.native_group_norm(x, None, None, 2, 3, 20, 3, 1e-5)
    assert [t.stride() for t in got] == [t.stride() for t in want] and got[0].stride() == x.stride()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_convolution_and_pooling_results_keep_torchs_memory_format(dtype):
    """Convolutions 1-d to 3-d and poolings, contiguous or channels-last input or weight: the output
    and the gradients of input, weight and bias laid out as torch CPU lays them out (3-d in float16:
    contiguous, as its kernel writes them)."""
    generator = torch.Generator().manual_seed(3)
    compared = 0
    for dims, conv in ((1, torch.nn.Conv1d), (2, torch.nn.Conv2d), (3, torch.nn.Conv3d)):
        memory = {2: torch.channels_last, 3: torch.channels_last_3d}.get(dims)
        for where in ("input", "weight", None):
            if memory is None and where is not None:
                continue
            layer = conv(4, 6, 3, padding=1).to(dtype)
            x = torch.randn((2, 4) + (5,) * dims, generator=generator).to(dtype)
            if where == "input":
                x = x.contiguous(memory_format=memory)
            elif where == "weight":
                layer = layer.to(memory_format=memory)
            x.requires_grad_()
            functions = [layer] + ([lambda t: F.max_pool2d(t, 2), lambda t: F.avg_pool2d(t, 2),
                                    lambda t: F.adaptive_max_pool2d(t, 3)] if dims == 2 else [])
            for function in functions:
                runs = []
                for emulated in (False, True):
                    with sft.emulate() if emulated else contextlib.nullcontext():
                        y = function(x)
                        grads = torch.autograd.grad(y.float().sum(), [x] + list(layer.parameters())
                                                    if function is layer else [x])
                    runs.append([t.stride() for t in (y, *grads)])
                assert runs[1] == runs[0], (dims, where, function)
                compared += 1
    assert compared == 16


def test_from_bits_lays_row_major_values_out_with_the_strides_asked():
    patterns = torch.arange(6, dtype=torch.int16).numpy().view("uint16")
    plain = from_bits(patterns, torch.float16, (2, 3))
    strided = from_bits(patterns, torch.float16, Strided((2, 3), (1, 2)))
    assert plain.stride() == (3, 1) and strided.stride() == (1, 2)
    assert bits(strided).tolist() == bits(plain).tolist()  # the same values in the same logical order
    assert laid_out((2, 1, 3), (3, 7, 1)) == torch.Size([2, 1, 3])  # size-1 strides do not count
    assert laid_out((0, 3), (1, 5)) == torch.Size([0, 3])


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_a_native_and_an_emulated_transformer_trace_record_the_same_ops(training, tmp_path):
    """``python -m softfloat16.torch compare`` of a native and an emulated TransformerEncoderLayer
    step: the op lists agree (the emulated results are laid out as torch's), so the comparison
    runs."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                             batch_first=True).to(torch.bfloat16).train(training)
    x = torch.randn(2, 5, 16).to(torch.bfloat16).requires_grad_(training)
    paths = [tmp_path / "native.npz", tmp_path / "emulated.npz"]
    for path, mode in zip(paths, (contextlib.nullcontext(), sft.emulate())):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        with mode, record(path, model=layer):
            y = layer(x)
            if training:
                y.float().sum().backward()
    native, emulated = (load_trace(path) for path in paths)
    assert [op.name for op in native.ops] == [op.name for op in emulated.ops]
    assert len(native.ops) >= (50 if training else 15)
    assert "aten._scaled_dot_product_flash_attention_for_cpu.default" in {op.name for op in native.ops}
    result = compare_traces(native, emulated)  # raised TraceMismatch before
    assert len(result.divergent) < len(native.ops)


def test_tensor_iterators_layout_rule_on_random_layouts_and_broadcasts():
    """operands._layout (TensorIterator's dimension order, computed without a meta call) against
    torch's own neg / add / addcmul results on random shapes, permutations, slices, expansions and
    broadcasts of one to three operands."""
    from softfloat16.torch.operands import _layout

    rng = np.random.default_rng(7)

    def laid(shape):
        kind = rng.integers(5)
        if kind == 1 and shape:  # expanded
            return torch.randn([1 if rng.random() < 0.5 else n for n in shape]).expand(shape)
        if kind in (2, 3):  # permuted, and sliced too
            order = rng.permutation(len(shape))
            scale = 2 if kind == 3 else 1
            base = torch.randn([shape[i] * scale for i in order])
            if kind == 3:
                base = base[tuple(slice(None, None, 2) for _ in order)]
            return base.permute(*np.argsort(order).tolist())
        if kind == 4:  # sliced
            return torch.randn([n * 2 for n in shape])[tuple(slice(None, None, 2) for _ in shape)]
        return torch.randn(shape)

    laid_out_otherwise = 0
    for _ in range(400):
        shape = [int(n) for n in rng.integers(1, 5, rng.integers(1, 5))]
        operands = [laid(shape)]
        for _ in range(rng.integers(0, 3)):
            dropped = int(rng.integers(0, 2)) * int(rng.integers(len(shape)))  # leading dimensions left out
            other = [1 if rng.random() < 0.4 else n for n in shape][dropped:]
            operands.append(laid(other))
        want = (torch.neg, torch.add, torch.addcmul)[len(operands) - 1](*operands)
        got = _layout(operands, want.shape)
        strides = getattr(got, "strides", want.contiguous().stride())
        assert all(a == b for a, b, n in zip(strides, want.stride(), want.shape) if n != 1), [
            (tuple(t.shape), t.stride()) for t in operands]
        laid_out_otherwise += isinstance(got, Strided)
    assert laid_out_otherwise > 50
