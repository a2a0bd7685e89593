"""Recurrent layers under the mode: ``nn.LSTM``'s oneDNN layer op (``mkldnn_rnn_layer`` and its
backward, softfloat16/torch/rnn.py) against torch's own op-by-op decomposition run by the mode
(oneDNN off), and against native torch; ``nn.GRU``, ``nn.RNN`` and the cells under
``strict=True``; ``sigmoid_backward`` (the gates' backward) against torch CPU's kernel."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16.torch as sft  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

# torch warns about TF32 on Intel GPUs whenever the oneDNN flags are set
pytestmark = pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")
aten = torch.ops.aten
INTEGERS = {2: torch.int16, 4: torch.int32}
# torch sends an LSTM to oneDNN for float32, and for bfloat16 where the processor has oneDNN's BF16 support
ONEDNN = torch.backends.mkldnn.is_available()
ONEDNN_DTYPES = [pytest.param(torch.bfloat16, marks=pytest.mark.skipif(
    not (ONEDNN and torch.ops.mkldnn._is_mkldnn_bf16_supported()), reason="no oneDNN BF16 LSTM on this machine")),
    pytest.param(torch.float32, marks=pytest.mark.skipif(not ONEDNN, reason="torch without oneDNN"))]
needs_bf16_onednn = ONEDNN_DTYPES[0].marks[0]


class OpLog(TorchDispatchMode):
    """The aten op packets a block dispatches (entered inside ``emulate``, it sees them first)."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def assert_same_bits(got, want, what):
    assert (got is None) == (want is None), what
    if got is None:
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    integer = INTEGERS[got.element_size()]
    differ = got.detach().contiguous().view(integer) != want.detach().contiguous().view(integer)
    assert not differ.any(), f"{what}: {int(differ.sum())} of {differ.numel()} differ"


def train_step(cls, dtype, *, layers=1, bidirectional=False, batch_first=False, initial=False, bias=True,
               use="out", optimizer="adamw", onednn=True, emulated=True, steps=3, batch=2, **options):
    """One forward, backward and optimizer step of a small recurrent model. Returns the named
    results (outputs, gradients, updated parameters) and the aten ops the mode saw."""
    torch.manual_seed(0)
    model = cls(3, 4, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias).to(dtype)
    x = torch.randn((batch, steps, 3) if batch_first else (steps, batch, 3)).to(dtype).requires_grad_()
    states = [torch.randn(layers * (2 if bidirectional else 1), batch, 4).to(dtype).requires_grad_()
              for _ in range(2 if cls is torch.nn.LSTM else 1)]
    if optimizer == "adamw":
        step = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=False, fused=False)
    else:
        step = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    log = OpLog()
    with torch.backends.mkldnn.flags(enabled=onednn):
        if emulated:
            with sft.emulate(strict=True, **options) as mode, log:
                out, final = _run(model, x, states, initial, cls, use, step)
            assert not mode.fallbacks
        else:
            out, final = _run(model, x, states, initial, cls, use, step)
    results = {"output": out, "x.grad": x.grad}
    results.update({f"final {i}": t for i, t in enumerate(final)})
    results.update({f"state {i} grad": t.grad for i, t in enumerate(states)} if initial else {})
    for name, parameter in model.named_parameters():
        results[f"{name}.grad"], results[name] = parameter.grad, parameter.detach()
    return results, log.ops


def _run(model, x, states, initial, cls, use, step):
    lstm = cls is torch.nn.LSTM
    out, final = model(x, (tuple(states) if lstm else states[0]) if initial else None)
    final = final if lstm else (final,)
    terms = {"out": [out.float().pow(2).sum()], "h": [final[0].float().sum()], "c": [final[-1].float().sum()]}
    terms["all"] = terms["out"] + terms["h"] + [final[-1].float().pow(2).sum()]
    sum(terms[use]).backward()
    step.step()
    return out, final


LSTM_CASES = {
    "1 layer": dict(),
    "2 layers, bidirectional, batch_first, initial states": dict(layers=2, bidirectional=True, batch_first=True,
                                                                 initial=True, use="all"),
    "2 layers, batch_first, loss on h_n, SGD": dict(layers=2, batch_first=True, initial=True, use="h", optimizer="sgd"),
    "bidirectional, no bias, loss on c_n": dict(bidirectional=True, initial=True, bias=False, use="c"),
}


@pytest.mark.parametrize("case", LSTM_CASES, ids=list(LSTM_CASES))
@pytest.mark.parametrize("dtype", ONEDNN_DTYPES, ids=str)
def test_lstm_onednn_layer_is_torchs_decomposition(dtype, case):
    """With oneDNN on, torch runs one ``mkldnn_rnn_layer`` per layer and direction; the mode
    computes it as torch's CPU decomposition: outputs, every gradient and the parameters after
    the optimizer step are bit-identical to the model run op by op (oneDNN off)."""
    fused, fused_ops = train_step(torch.nn.LSTM, dtype, **LSTM_CASES[case])
    plain, plain_ops = train_step(torch.nn.LSTM, dtype, onednn=False, **LSTM_CASES[case])
    assert {"aten.mkldnn_rnn_layer", "aten.mkldnn_rnn_layer_backward"} <= fused_ops
    assert "aten.mkldnn_rnn_layer" not in plain_ops and "aten.unsafe_split" in plain_ops
    assert fused.keys() == plain.keys()
    for name in fused:
        assert_same_bits(fused[name], plain[name], f"{dtype} {case}: {name}")


@needs_bf16_onednn
def test_lstm_layer_follows_the_machine():
    """Another rounding and accumulation order: still the decomposition, step for step."""
    case = dict(layers=2, bidirectional=True, initial=True, use="all", rounding="rtz", order="pairwise")
    fused, _ = train_step(torch.nn.LSTM, torch.bfloat16, **case)
    plain, _ = train_step(torch.nn.LSTM, torch.bfloat16, onednn=False, **case)
    nearest, _ = train_step(torch.nn.LSTM, torch.bfloat16, **{**case, "rounding": "rne"})
    for name in fused:
        assert_same_bits(fused[name], plain[name], name)
    assert not torch.equal(fused["output"], nearest["output"])


@needs_bf16_onednn
def test_bf16_lstm_equals_native_torch_without_onednn():
    """Measured: with these shapes the mode's BF16 LSTM (through the oneDNN layer op) is
    bit-identical to native torch CPU running the decomposition (oneDNN off), gradients and
    AdamW step included; native oneDNN differs from both."""
    case = dict(layers=2, bidirectional=True, batch_first=True, initial=True, use="all")
    emulated, _ = train_step(torch.nn.LSTM, torch.bfloat16, **case)
    native, _ = train_step(torch.nn.LSTM, torch.bfloat16, onednn=False, emulated=False, **case)
    onednn, _ = train_step(torch.nn.LSTM, torch.bfloat16, emulated=False, **case)
    for name in emulated:
        assert_same_bits(emulated[name], native[name], name)
    assert not torch.equal(onednn["x.grad"], native["x.grad"])


def test_fp16_layer_op_called_directly_equals_the_decomposition():
    """torch sends float16 to oneDNN too (inference, on processors with its FP16 support): the
    op and its backward, called directly, give what autograd of the FP16 model run op by op gives."""
    torch.manual_seed(3)
    model = torch.nn.LSTM(3, 5).half()
    x = torch.randn(4, 2, 3).half().requires_grad_()
    h0, c0 = (torch.randn(1, 2, 5).half().requires_grad_() for _ in range(2))
    grad_out = torch.randn(4, 2, 5).half()
    weights = list(model.parameters())
    with sft.emulate(strict=True):
        out, (hn, cn) = model(x, (h0, c0))
        want = torch.autograd.grad((out, cn), [x, *weights, h0, c0], (grad_out, cn.detach()))
        layer_args = [x.detach()] + [w.detach() for w in weights] + [h0.detach()[0], c0.detach()[0]]
        y, hy, cy, workspace = aten.mkldnn_rnn_layer(*layer_args, False, [], 2, 5, 1, True, False, False, True)
        got = aten.mkldnn_rnn_layer_backward(*layer_args, y, hy, cy, grad_out, None, cn.detach()[0], False, 2, 5,
                                             1, True, True, False, [], False, workspace)
    for name, a, b in (("output", y, out), ("h_n", hy, hn[0]), ("c_n", cy, cn[0])):
        assert_same_bits(a, b.detach(), name)
    names = ["x", "w_ih", "w_hh", "b_ih", "b_hh"]
    for name, g, w in zip(names, got[:5], want[:5]):
        assert g.dtype == torch.float32
        assert_same_bits(g.half(), w, f"grad {name}")
    assert_same_bits(got[5].half(), want[5][0], "grad h0")
    assert_same_bits(got[6].half(), want[6][0], "grad c0")


@pytest.mark.parametrize("arguments, message", [
    (dict(mode=1), "mode 1"),
    (dict(batch_sizes=[2, 1]), "packed sequence"),
    (dict(dtype=torch.float16), "dtypes"),
], ids=["GRU kind", "packed", "mixed dtypes"])
def test_layer_op_refuses_what_it_does_not_compute(arguments, message):
    x = torch.randn(2, 2, 3, dtype=torch.bfloat16)
    weights = [torch.randn(16, 3), torch.randn(16, 4), torch.randn(16), torch.randn(16)]
    weights = [w.to(arguments.get("dtype", torch.bfloat16)) for w in weights]
    h = torch.zeros(2, 4, dtype=torch.bfloat16)
    with pytest.raises(sft.NotEmulatedError, match=f"mkldnn_rnn_layer.*{message}"), sft.emulate(strict=True):
        aten.mkldnn_rnn_layer(x, *weights, h, h, False, arguments.get("batch_sizes", []), arguments.get("mode", 2),
                              4, 1, True, False, False, False)


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN], ids=lambda c: c.__name__)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_recurrent_models_train_under_strict(cls, dtype):
    """2 layers, bidirectional, batch_first, initial states, AdamW: every op emulated (GRU, RNN
    and FP16 LSTM run op by op: their chunks are ``unsafe_split`` views), close to native torch."""
    case = dict(layers=2, bidirectional=True, batch_first=True, initial=True, use="all")
    emulated, ops = train_step(cls, dtype, **case)
    native, _ = train_step(cls, dtype, emulated=False, **case)
    for name in emulated:
        assert torch.allclose(emulated[name].float(), native[name].float(), rtol=2 ** -5, atol=2 ** -7), name


@pytest.mark.parametrize("cell", [torch.nn.LSTMCell, torch.nn.GRUCell, torch.nn.RNNCell], ids=lambda c: c.__name__)
def test_cells_run_under_strict(cell):
    torch.manual_seed(1)
    model = cell(3, 4).half()
    x = torch.randn(2, 3).half()
    with sft.emulate(strict=True) as mode:
        out = model(x)
        (out[0] if isinstance(out, tuple) else out).float().sum().backward()
    assert not mode.fallbacks and model.weight_hh.grad is not None


# -- sigmoid_backward, the gates' backward: torch CPU's kernel ---------------------------------------------------
def random_tensor(n: int, dtype, rng) -> torch.Tensor:
    """n random bit patterns of ``dtype`` (every class: subnormals, infinities, NaNs)."""
    width = 8 * torch.empty((), dtype=dtype).element_size()
    patterns = rng.integers(0, 1 << width, n, dtype=np.uint64).astype(f"uint{width}").view(f"int{width}")
    return torch.from_numpy(patterns).view(dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_sigmoid_backward_is_torch_cpus_kernel(dtype):
    """``grad * (1 - y) * y``: FP16 rounds each operation into FP16 (torch's Half arithmetic),
    BF16 and FP32 compute in FP32 and round once. 100,003 random pairs (half of them with y in
    [0, 1], where sigmoid's outputs live) and short lengths (vectorised body and scalar tail):
    every bit equal to torch CPU but NaN payloads (NaN-ness equal)."""
    rng = np.random.default_rng(11)
    integer = INTEGERS[torch.empty((), dtype=dtype).element_size()]
    for n in (100_003, 1, 15, 17, 31, 33, 63, 65):
        grad, y = random_tensor(n, dtype, rng), random_tensor(n, dtype, rng)
        y[: n // 2] = torch.from_numpy(rng.random(n // 2)).to(dtype)
        want = aten.sigmoid_backward(grad, y)
        with sft.emulate(strict=True):
            got = aten.sigmoid_backward(grad, y)
        assert torch.equal(got.isnan(), want.isnan())
        differ = (got.view(integer) != want.view(integer)) & ~want.isnan()
        assert not differ.any(), f"{dtype}, length {n}: {int(differ.sum())} differ"


def test_packed_sequences_run_under_strict():
    """``pack_padded_sequence`` (``_pack_padded_sequence``: rows copied) and the LSTM torch runs
    on packed data op by op."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    torch.manual_seed(2)
    model = torch.nn.LSTM(3, 4, bidirectional=True).bfloat16()
    x = torch.randn(4, 3, 3).bfloat16().requires_grad_()
    with sft.emulate(strict=True) as mode:
        packed = pack_padded_sequence(x, torch.tensor([4, 3, 2]))
        out, _ = pad_packed_sequence(model(packed)[0])
        out.float().sum().backward()
    assert not mode.fallbacks and (x.grad[3, 1:] == 0).all() and (x.grad[:2] != 0).any()
