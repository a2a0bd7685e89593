"""Recurrent layers: torch CPU's oneDNN LSTM layer, ``mkldnn_rnn_layer``, and its backward.

On the CPU ``nn.LSTM`` of float32 and bfloat16 tensors (float16 too, without autograd, on
processors with oneDNN's FP16 support) runs one fused oneDNN primitive per layer and direction,
whose arithmetic (blocked GEMMs, its own gate functions) is not defined bit for bit. The mode
computes that op as torch's own CPU decomposition, the code torch runs when oneDNN is off
(``torch.backends.mkldnn.flags(enabled=False)``, and always for float16 with autograd, ``nn.GRU``
and ``nn.RNN``): every step an aten op emulated by the mode under the same machine, so the three
formats follow one rule and the layer is bit-identical to the same model run op by op.

For a sequence ``x`` of shape (T, B, I) and the gate weights ``W_ih`` (4H, I), ``W_hh`` (4H, H):

1. ``iw = x @ W_ih^T + b_ih`` for all T steps at once (``addmm`` on the T*B rows; without biases
   ``mm``). torch's first layer with ``batch_first=True`` (T, B > 1) multiplies the transposed,
   non-contiguous input (``matmul``, rounded) and adds ``b_ih`` after (``add``): so does the mode.
2. each step, in time order (reversed for the second direction): ``gates = (h @ W_hh^T + b_hh)
   + iw[t]``; ``i, f, g, o = sigmoid, sigmoid, tanh, sigmoid`` of its four chunks;
   ``c = f * c + i * g``; ``h = o * tanh(c)``; the output at t is ``h``.

The backward is autograd's of those ops, in the engine's order: per step, last to first,
``dh = dout[t] + dh_next``, ``dc = dc_next + tanh_backward(dh * o, tanh(c))``, the gate gradients
``sigmoid_backward(dc * g, i)``, ``sigmoid_backward(dc * c_prev, f)``, ``tanh_backward(dc * i, g)``,
``sigmoid_backward(dh * tanh(c), o)`` concatenated, ``dh_prev = dgates @ W_hh``,
``dc_prev = dc * f``; ``dW_hh`` and ``db_hh`` (a ``sum`` over the batch) of each step added up
from the last step to the first, each addition rounded; ``dx``, ``dW_ih``, ``db_ih`` from the
stacked gate gradients in one ``mm`` and one ``sum`` each.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .opmath import ARITHMETIC
from .registry import NotEmulated, NotEmulatedError, aten, emulation, implements

__all__ = ["LSTM_MODE"]

#: ``mode`` of an LSTM in oneDNN's numbering (ideep::rnn_kind::LSTM), the only kind torch sends.
LSTM_MODE = 2

_LAYER_ARGS = ("input", "weight0", "weight1", "weight2", "weight3", "hx_", "cx_", "reverse", "batch_sizes", "mode",
               "hidden_size", "num_layers", "has_biases", "bidirectional", "batch_first", "train")
_BACKWARD_ARGS = ("input", "weight1", "weight2", "weight3", "weight4", "hx_", "cx_tmp", "output", "hy_", "cy_",
                  "grad_output", "grad_hy", "grad_cy", "reverse", "mode", "hidden_size", "num_layers", "has_biases",
                  "train", "bidirectional", "batch_sizes", "batch_first", "workspace")


class Layer(NamedTuple):
    """One layer and direction: input (T, B, I), weights, initial state (B, H), and options."""
    x: torch.Tensor
    w_ih: torch.Tensor
    w_hh: torch.Tensor
    b_ih: torch.Tensor | None
    b_hh: torch.Tensor | None
    hx: torch.Tensor
    cx: torch.Tensor
    reverse: bool
    split_bias: bool  # the input projection as torch's first batch_first layer computes it: mm, then + b_ih


class Step(NamedTuple):
    """What one step keeps for the backward: its state in and out, gates and tanh(c)."""
    h_prev: torch.Tensor
    c_prev: torch.Tensor
    i: torch.Tensor
    f: torch.Tensor
    g: torch.Tensor
    o: torch.Tensor
    tanh_c: torch.Tensor
    h: torch.Tensor
    c: torch.Tensor


def _arguments(names, args, kwargs) -> dict:
    found = dict(zip(names, args))
    found.update({k: v for k, v in kwargs.items() if k in names})
    return found


def _first_layer(hx: torch.Tensor, directions: int, layers: int) -> bool:
    """Whether this call is the first layer: torch's ``mkldnn_rnn`` hands each layer and direction
    ``hx[layer * directions + direction]`` of its contiguous (layers * directions, B, H) state, so
    the view's storage offset tells the layer."""
    index, rest = divmod(hx.storage_offset(), hx.numel())
    if not hx.is_contiguous() or rest or index >= layers * directions:
        raise NotEmulated("mkldnn_rnn_layer with batch_first=True and an initial state hx_ that is not a slice of "
                          "the (num_layers * num_directions, batch, hidden) state torch's nn.LSTM passes")
    return index // directions == 0


def _layer(p: dict, op: str) -> Layer:
    x, w_ih, w_hh, hx, cx = p["input"], p["weight0"], p["weight1"], p["hx_"], p["cx_"]
    if p["mode"] != LSTM_MODE:
        raise NotEmulated(f"{op} of mode {p['mode']} (emulated: {LSTM_MODE}, an LSTM; torch runs GRU and RNN op by op)")
    if list(p["batch_sizes"]):
        raise NotEmulated(f"{op} of a packed sequence (batch_sizes)")
    tensors = [x, w_ih, w_hh, hx, cx] + ([p["weight2"], p["weight3"]] if p["has_biases"] else [])
    if len({t.dtype for t in tensors}) != 1 or x.dtype not in ARITHMETIC:
        raise NotEmulated(f"{op}: dtypes {sorted({str(t.dtype) for t in tensors})} (emulated: one of float16, "
                          "bfloat16, float32 for input, weights and states)")
    hidden = int(p["hidden_size"])
    if x.dim() != 3 or x.numel() == 0 or tuple(w_ih.shape) != (4 * hidden, x.shape[2]) or \
            tuple(w_hh.shape) != (4 * hidden, hidden) or tuple(hx.shape) != (x.shape[1], hidden) or \
            tuple(cx.shape) != tuple(hx.shape):
        raise NotEmulated(f"{op}: shapes input {tuple(x.shape)}, weights {tuple(w_ih.shape)} {tuple(w_hh.shape)}, "
                          f"states {tuple(hx.shape)} {tuple(cx.shape)} for hidden_size {hidden}")
    steps, batch = x.shape[0], x.shape[1]
    split = bool(p["batch_first"]) and steps > 1 and batch > 1 and _first_layer(
        hx, 2 if p["bidirectional"] else 1, int(p["num_layers"]))
    biases = (p["weight2"], p["weight3"]) if p["has_biases"] else (None, None)
    return Layer(x, w_ih, w_hh, *biases, hx, cx, bool(p["reverse"]), split)


def _input_gates(layer: Layer) -> torch.Tensor:
    """``x @ W_ih^T + b_ih`` for every step, (T, B, 4H): torch's ``linear`` of the sequence."""
    steps, batch, width = layer.x.shape
    rows = layer.x.reshape(steps * batch, width)
    if layer.b_ih is None:
        out = aten.mm(rows, layer.w_ih.t())
    elif layer.split_bias:
        out = aten.add(aten.mm(rows, layer.w_ih.t()), layer.b_ih)
    else:
        out = aten.addmm(layer.b_ih, rows, layer.w_ih.t())
    return out.reshape(steps, batch, -1)


def _recurrent(layer: Layer, h: torch.Tensor) -> torch.Tensor:
    """``h @ W_hh^T + b_hh`` (``linear`` of a 2-d input: ``addmm``, or ``mm`` without bias)."""
    if layer.b_hh is None:
        return aten.mm(h, layer.w_hh.t())
    return aten.addmm(layer.b_hh, h, layer.w_hh.t())


def _order(layer: Layer) -> list[int]:
    """The time indices in the order the layer visits them."""
    steps = layer.x.shape[0]
    return list(range(steps - 1, -1, -1)) if layer.reverse else list(range(steps))


def _forward(layer: Layer) -> tuple[torch.Tensor, list[Step]]:
    """The layer's steps (run under an emulation mode): the input gates, then the cell per step.
    Returns the input gates and the steps in visiting order."""
    iw = _input_gates(layer)
    h, c = layer.hx, layer.cx
    steps = []
    for t in _order(layer):
        gates = aten.add(_recurrent(layer, h), iw[t])
        i, f, g, o = gates.chunk(4, 1)
        i, f, g, o = aten.sigmoid(i), aten.sigmoid(f), aten.tanh(g), aten.sigmoid(o)
        c_new = aten.add(aten.mul(f, c), aten.mul(i, g))
        tanh_c = aten.tanh(c_new)
        h_new = aten.mul(o, tanh_c)
        steps.append(Step(h, c, i, f, g, o, tanh_c, h_new, c_new))
        h, c = h_new, c_new
    return iw, steps


def _emulated(machine, op: str, compute):
    try:
        with emulation(machine):
            return compute()
    except NotEmulatedError as error:
        raise NotEmulated(f"{op}: its decomposition needs an op that is not emulated ({error})") from error


@implements("mkldnn_rnn_layer", inplace=False)
def mkldnn_rnn_layer(machine, func, args, kwargs):
    """One LSTM layer and direction as torch's CPU decomposition computes it (module docstring).
    Returns (output (T, B, H), h_T, c_T, an empty workspace)."""
    op = "mkldnn_rnn_layer"
    layer = _layer(_arguments(_LAYER_ARGS, args, kwargs), op)

    def compute():
        _, steps = _forward(layer)
        outputs = [s.h for s in (steps[::-1] if layer.reverse else steps)]
        return aten.stack(outputs, 0), steps[-1].h, steps[-1].c

    output, hy, cy = _emulated(machine, op, compute)
    return output, hy, cy, torch.empty(0, dtype=torch.uint8)


def _plus(first: torch.Tensor | None, second: torch.Tensor | None) -> torch.Tensor | None:
    """Two gradients of one tensor added as autograd's input buffer adds them (first + second),
    either alone where the other is undefined."""
    if first is None:
        return second
    return first if second is None else aten.add(first, second)


def _bias_sum(grad: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """autograd's ``sum_to`` of a bias gradient: a ``sum`` over the leading dimensions."""
    return aten.sum(grad, dims, True).reshape(grad.shape[-1])


def _step_backward(layer: Layer, step: Step, dh, dc):
    """One step's gradients: (dgates, dh_prev, dc_prev); ``dh``/``dc`` may be None (undefined)."""
    if dh is None:  # no gradient reaches h: autograd's split backward puts zeros for the o chunk
        d_o, d_tanh_c = torch.zeros_like(step.o), None
    else:  # h = o * tanh(c)
        d_o = aten.sigmoid_backward(aten.mul(dh, step.tanh_c), step.o)
        d_tanh_c = aten.tanh_backward(aten.mul(dh, step.o), step.tanh_c)
    dc = _plus(dc, d_tanh_c)
    di = aten.sigmoid_backward(aten.mul(dc, step.g), step.i)
    dg = aten.tanh_backward(aten.mul(dc, step.i), step.g)
    df = aten.sigmoid_backward(aten.mul(dc, step.c_prev), step.f)
    dgates = aten.cat([di, df, dg, d_o], 1)
    return dgates, aten.mm(dgates, layer.w_hh), aten.mul(dc, step.f)


def _backward(layer: Layer, grad_output, grad_hy, grad_cy):
    """Gradients (dx, dW_ih, dW_hh, db_ih, db_hh, dhx, dcx) of the layer, autograd's arithmetic
    in its order (module docstring); run under an emulation mode."""
    iw, steps = _forward(layer)
    times = _order(layer)
    dgates = [None] * len(times)
    dh_next = dc_next = dw_hh = db_hh = None
    for position in range(len(steps) - 1, -1, -1):
        step, t = steps[position], times[position]
        last = position == len(steps) - 1
        out = None if grad_output is None else grad_output[t]
        dh = _plus(grad_hy, out) if last else _plus(out, dh_next)
        dc = grad_cy if last else dc_next
        dgates[t], dh_next, dc_next = _step_backward(layer, step, dh, dc)
        dw_hh = _plus(dw_hh, aten.mm(step.h_prev.t(), dgates[t]).t())
        if layer.b_hh is not None:
            db_hh = _plus(db_hh, _bias_sum(dgates[t], [0]))
    d_iw = aten.stack(dgates, 0)
    rows = d_iw.reshape(-1, d_iw.shape[-1])
    x_rows = layer.x.reshape(rows.shape[0], -1)
    dx = aten.mm(rows, layer.w_ih).reshape(layer.x.shape)
    dw_ih = aten.mm(x_rows.t(), rows).t()
    db_ih = None
    if layer.b_ih is not None:
        db_ih = _bias_sum(d_iw, [0, 1]) if layer.split_bias else _bias_sum(rows, [0])
    return dx, dw_ih, dw_hh, db_ih, db_hh, dh_next, dc_next


@implements("mkldnn_rnn_layer_backward", inplace=False)
def mkldnn_rnn_layer_backward(machine, func, args, kwargs):
    """Gradients of :func:`mkldnn_rnn_layer`: its steps recomputed, then autograd's gradients of
    them (module docstring). Returned as float32, as torch's kernel returns them (autograd
    converts each into its input's dtype; the values are already rounded into it)."""
    op = "mkldnn_rnn_layer_backward"
    p = _arguments(_BACKWARD_ARGS, args, kwargs)
    renamed = {"weight0": p["weight1"], "weight1": p["weight2"], "weight2": p["weight3"], "weight3": p["weight4"],
               "cx_": p["cx_tmp"]}
    layer = _layer({**p, **renamed}, op)
    grads = p["grad_output"], p["grad_hy"], p["grad_cy"]
    if all(g is None for g in grads):
        raise NotEmulated(f"{op} with no gradient defined")
    if any(g is not None and g.dtype != layer.x.dtype for g in grads):
        raise NotEmulated(f"{op}: gradients of dtypes {[None if g is None else g.dtype for g in grads]} next to "
                          f"{layer.x.dtype} tensors")
    results = _emulated(machine, op, lambda: _backward(layer, *grads))
    dx, dw_ih, dw_hh, db_ih, db_hh, dhx, dcx = (None if r is None else machine.convert(r, torch.float32)
                                                for r in results)
    if db_ih is None:  # no biases: torch's zeros stand in for them and get a zero gradient
        db_ih, db_hh = (torch.zeros(p[name].shape, dtype=torch.float32) for name in ("weight3", "weight4"))
    return dx, dw_ih, dw_hh, db_ih, db_hh, dhx, dcx
