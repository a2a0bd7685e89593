"""Op records, the recorder that makes them, and the emulator's side of every op.

A training run is a sequence of named ops (:mod:`sim.crosscheck.program`). Each op has a *kind*
("matmul", "relu.backward", "sgd_step", ...), named inputs and named outputs. A backend computes
the kind: :class:`EmulatorBackend` (here) with sim's own code, the torch reference
(:mod:`sim.crosscheck.reference`) with torch. A :class:`Recorder` runs ops on one backend and keeps
an :class:`OpRecord` of each: inputs and outputs as bit arrays with their format. Because every
emulator kind is a pure function of its inputs and attributes, any record can be *replayed*:
:func:`replay` feeds each op of another side's records (the device's own inputs) to the emulator,
so every op is judged on its own and a divergence does not cascade.

The emulator kinds call sim's real code: forward ops are :mod:`sim.tensor` ops, backward kinds
rebuild the node from its forward inputs and call its own ``backward_rule``, optimizer steps are
:class:`sim.optim.SGD` / :class:`sim.optim.Adam` with the state loaded, the loss-scale update is
:class:`sim.scaler.DynamicLossScaler`.

>>> import numpy as np, softfloat16 as sf
>>> recorder = Recorder(EmulatorBackend())
>>> x = recorder.constant(sf.fp16.from_float(np.array([[-1.0, 2.0]])), "fp16")
>>> recorder.run("relu", "demo.relu", {"x": x})["out"].data.view(np.float16)
array([[0., 2.]], dtype=float16)
>>> record = recorder.records[0]
>>> record.key, record.kind, [(role, fmt, bits.tolist()) for role, fmt, bits in record.outputs]
((0, 'demo.relu'), 'relu', [('out', 'fp16', [[0, 16384]])])
"""
from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

import softfloat16 as sf
import softfloat16.linalg as linalg
import softfloat16.tensor_cores as tensor_cores
from sim import gemm, tensor
from sim.diagnostics import count_nonfinite
from sim.optim import SGD, Adam
from sim.scaler import DynamicLossScaler, StaticLossScaler
from softfloat16.optrace import TracedOp, Value, storage_dtype

__all__ = [
    "DATA_FORMATS",
    "FLOAT_FORMATS",
    "KINDS",
    "Backend",
    "EmulatorBackend",
    "OpRecord",
    "Recorder",
    "Val",
    "replay",
]

# The formats a dump holds: those a training run computes in, and the FP8 operands of the fp8
# recipe. (Not sim.config.PRECISIONS: there fp8/mxfp8/nvfp4 name recipes, not formats.) The names
# and storage dtypes are the op-trace table's (softfloat16.optrace.VALUE_FORMATS).
FLOAT_FORMATS = {fmt.name: fmt for fmt in (sf.fp32, sf.fp16, sf.bf16, sf.fp8_e4m3fn, sf.fp8_e5m2)}
DATA_FORMATS = {name: storage_dtype(name) for name in ("bool", "int32", "int64")}


@dataclasses.dataclass
class Val:
    """A value held by a backend (a numpy bit array, or a torch tensor) and its format name."""

    data: Any
    fmt: str


Bits = Value  # (role, format name, bit array)


@dataclasses.dataclass
class OpRecord(TracedOp):
    """One executed op: where it ran in the program, what it is, what went in and came out (the
    fields of :class:`softfloat16.optrace.TracedOp`).

    ``impl`` names how the backend computed it (``"sim"``, ``"exact"``, ``"library:torch.exp"``,
    ...); a divergence of a ``library`` op is expected, of any other op it is not.
    """

    @property
    def key(self) -> tuple[int, str]:
        return self.step, self.name

    def label(self) -> str:
        """``step 3 fc1.matmul`` (``init`` / ``final`` for the ops outside the steps)."""
        where = {-1: "init"}.get(self.step, f"step {self.step}")
        return f"{where} {self.name}" if self.kind != "state" else f"final {self.name}"


class Backend(Protocol):
    """What the recorder needs from a side: bit conversion and one entry point per op."""

    name: str

    def from_bits(self, bits: np.ndarray, fmt: str) -> Any: ...

    def to_bits(self, data: Any, fmt: str) -> np.ndarray: ...

    def run(self, kind: str, inputs: dict[str, Val], attrs: dict[str, Any]) -> tuple[dict[str, Val], str]: ...


class Recorder:
    """Runs ops on a backend, in program order, keeping an :class:`OpRecord` of each.

    ``record=False`` runs without keeping anything (to time a backend). ``step`` is set by the
    program; records made before the first step carry -1.
    """

    def __init__(self, backend: Backend, record: bool = True) -> None:
        self.backend = backend
        self.record = record
        self.records: list[OpRecord] = []
        self.step = 0
        self._cache: dict[int, tuple[Any, np.ndarray]] = {}

    def _bits(self, value: Val) -> np.ndarray:
        # One conversion per backend object: an op's inputs are mostly earlier ops' outputs.
        cached = self._cache.get(id(value.data))
        if cached is not None and cached[0] is value.data:
            return cached[1]
        bits = np.asarray(self.backend.to_bits(value.data, value.fmt))
        self._cache[id(value.data)] = (value.data, bits)
        return bits

    def _keep(self, step: int, name: str, kind: str, impl: str, attrs: dict[str, Any],
              inputs: dict[str, Val], outputs: dict[str, Val]) -> None:
        if not self.record:
            return
        self.records.append(OpRecord(
            step, name, kind, impl, dict(attrs),
            [(role, v.fmt, self._bits(v)) for role, v in inputs.items()],
            [(role, v.fmt, self._bits(v)) for role, v in outputs.items()],
        ))

    def new_step(self, step: int) -> None:
        """Start step ``step`` (drops the conversion cache of the previous one)."""
        self.step = step
        self._cache.clear()

    def constant(self, bits: np.ndarray, fmt: str) -> Val:
        """A value the program makes itself (not recorded on its own: it shows up as an input)."""
        return Val(self.backend.from_bits(np.asarray(bits, dtype=storage_dtype(fmt)), fmt), fmt)

    def source(self, name: str, values: dict[str, tuple[np.ndarray, str]]) -> dict[str, Val]:
        """Values that enter the run from outside (initial weights, a batch): recorded as an op
        of kind ``source`` with outputs only."""
        outputs = {role: self.constant(bits, fmt) for role, (bits, fmt) in values.items()}
        self._keep(self.step, name, "source", "data", {}, {}, outputs)
        return outputs

    def state(self, name: str, values: dict[str, Val]) -> None:
        """Record values as they stand (the final master weights): an op of kind ``state``."""
        self._keep(self.step, name, "state", "data", {}, {}, values)

    def traced(self, kind: str, name: str, inputs: dict[str, tuple[np.ndarray, str]],
               outputs: dict[str, tuple[np.ndarray, str]], attrs: dict[str, Any]) -> None:
        """A :mod:`sim.trace` tracer: keep an op sim ran itself (``impl`` ``sim``)."""
        def bits(values: dict[str, tuple[np.ndarray, str]]) -> list[Bits]:
            return [(role, fmt, np.asarray(data, dtype=storage_dtype(fmt))) for role, (data, fmt) in values.items()]

        if self.record:
            self.records.append(OpRecord(self.step, name, kind, "sim", dict(attrs), bits(inputs), bits(outputs)))

    def run(self, kind: str, name: str, inputs: dict[str, Val], **attrs: Any) -> dict[str, Val]:
        """Compute op ``name`` of ``kind`` on the backend and record it; returns its outputs."""
        outputs, impl = self.backend.run(kind, inputs, attrs)
        self._keep(self.step, name, kind, impl, attrs, inputs, outputs)
        return outputs

    def to_bool(self, value: Val) -> bool:
        return bool(self.backend.to_bits(value.data, value.fmt))

    def to_float(self, value: Val) -> float:
        """The exact value of a 0-d float value (for control flow such as ``scale == 1``)."""
        return float(FLOAT_FORMATS[value.fmt].to_float(self.backend.to_bits(value.data, value.fmt)))


# --- the emulator's kinds ------------------------------------------------------------------------

EmulatorKind = Callable[["EmulatorBackend", dict[str, Val], dict[str, Any]], dict[str, Val]]
#: kind name -> the emulator's implementation; the set of kinds a dump may contain.
KINDS: dict[str, EmulatorKind] = {}


def _kind(name: str) -> Callable[[EmulatorKind], EmulatorKind]:
    def register(function: EmulatorKind) -> EmulatorKind:
        KINDS[name] = function
        return function
    return register


def _fmt(value: Val) -> sf.Format:
    return FLOAT_FORMATS[value.fmt]


def _leaf(value: Val, requires_grad: bool = False) -> tensor.Tensor:
    return tensor.Tensor(np.asarray(value.data, dtype=_fmt(value).dtype), _fmt(value), requires_grad)


def _out(data: np.ndarray, fmt: str) -> Val:
    return Val(np.asarray(data, dtype=storage_dtype(fmt)), fmt)


def _grads(names: tuple[str, ...], values: tuple, fmts: tuple[str, ...]) -> dict[str, Val]:
    """The non-None gradients of a backward rule, by role."""
    return {name: _out(value, fmt) for name, value, fmt in zip(names, values, fmts) if value is not None}


_ROOT = tensor.GradContext(None)  # the low-precision backward: gradients in each tensor's format


@_kind("from_float32")
def _from_float32(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    # As Trainer: the float32 features rounded once into the compute format.
    x = np.asarray(inputs["x"].data, dtype=np.uint32).view(np.float32)
    return {"out": _out(FLOAT_FORMATS[attrs["dst"]].from_float(x), attrs["dst"])}


@_kind("convert")
def _convert(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    x, dst = inputs["x"], attrs["dst"]
    return {"out": _out(sf.convert(x.data, src=_fmt(x), dst=FLOAT_FORMATS[dst]), dst)}


@_kind("matmul")
def _matmul(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    a, b = inputs["a"], inputs["b"]
    if backend.tensor_core is not None:
        data = linalg.matmul(a.data, b.data, _fmt(a), **tensor_cores.gemm_policy(backend.tensor_core, _fmt(a)))
    else:
        data = tensor.matmul(_leaf(a), _leaf(b)).data
    return {"out": _out(data, a.fmt)}


@_kind("matmul.backward")
def _matmul_backward(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    grad, a, b = inputs["grad"], inputs["a"], inputs["b"]
    requires_a, requires_b = attrs["requires"]
    if backend.tensor_core is not None:
        fmt = _fmt(a)
        policy = tensor_cores.gemm_policy(backend.tensor_core, fmt)
        grad_a = linalg.matmul(grad.data, np.asarray(b.data).T, fmt, **policy) if requires_a else None
        grad_b = linalg.matmul(np.asarray(a.data).T, grad.data, fmt, **policy) if requires_b else None
    else:
        node = tensor.matmul(_leaf(a, requires_a), _leaf(b, requires_b))
        grad_a, grad_b = node.backward_rule(np.asarray(grad.data), _ROOT)
    return _grads(("grad_a", "grad_b"), (grad_a, grad_b), (a.fmt, b.fmt))


@_kind("fp8_scale")
def _fp8_scale(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    # sim.gemm's TensorScaling with the op's state loaded: its amax, its scale rule, its history.
    scaling = gemm.TensorScaling(FLOAT_FORMATS[attrs["format"]], attrs["mode"], attrs["length"], attrs["margin"])
    history = np.asarray(inputs["history"].data, dtype=np.uint32).view(np.float32)
    scaling.load_state_dict({"scale": _scale_value(inputs["previous"]), "history": [float(v) for v in history]})
    amax = gemm.amax_bits(np.asarray(inputs["x"].data, dtype=np.uint32))
    scale = scaling.scale_for(amax.view(np.float32))
    return {
        "amax": _out(amax, "fp32"),
        "scale": _out(np.float32(scale).view(np.uint32), "fp32"),
        "scale_inv": _out((np.float32(1.0) / scale).view(np.uint32), "fp32"),
        "history": _out(np.asarray(scaling.history, dtype=np.float32).view(np.uint32), "fp32"),
    }


@_kind("fp8_quantize")
def _fp8_quantize(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    options: dict[str, Any] = {"saturate": True}
    if attrs["rounding"] == "sr":
        options.update(rounding="sr", seed=attrs["seed"])
    scaled = sf.fp32.mul(inputs["x"].data, inputs["scale"].data)
    return {"out": _out(sf.convert(scaled, src=sf.fp32, dst=FLOAT_FORMATS[attrs["dst"]], **options), attrs["dst"])}


@_kind("scaled_matmul")
def _scaled_matmul(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    a, b = inputs["a"], inputs["b"]
    accumulation = gemm.Accumulation() if backend.tensor_core is None else gemm.Accumulation(
        "tensorcore", backend.tensor_core)
    total = accumulation.matmul(np.ascontiguousarray(a.data), np.ascontiguousarray(b.data), _fmt(a), sf.fp32,
                                b_format=_fmt(b))
    out = sf.fp32.mul(sf.fp32.mul(total, inputs["a_scale_inv"].data), inputs["b_scale_inv"].data)
    return {"out": _out(out, "fp32")}


@_kind("add_bias")
def _add_bias(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    x = inputs["x"]
    return {"out": _out(tensor.add_bias(_leaf(x), _leaf(inputs["bias"])).data, x.fmt)}


@_kind("add_bias.backward")
def _add_bias_backward(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    x, bias = inputs["x"], inputs["bias"]
    requires_x, requires_bias = attrs["requires"]
    node = tensor.add_bias(_leaf(x, requires_x), _leaf(bias, requires_bias))
    grads = node.backward_rule(np.asarray(inputs["grad"].data), _ROOT)
    return _grads(("grad_x", "grad_bias"), grads, (x.fmt, bias.fmt))


def _one_input_kinds(kind: str, op: Callable[[tensor.Tensor], tensor.Tensor]) -> None:
    """Register ``kind`` and ``kind.backward`` for an op of one tensor ``x`` whose output keeps x's format."""
    def forward(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
        x = inputs["x"]
        return {"out": _out(op(_leaf(x)).data, x.fmt)}

    def backward(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
        x = inputs["x"]
        (grad,) = op(_leaf(x, True)).backward_rule(np.asarray(inputs["grad"].data), _ROOT)
        return {"grad_x": _out(grad, x.fmt)}

    KINDS[kind], KINDS[f"{kind}.backward"] = forward, backward


_one_input_kinds("relu", tensor.relu)
_one_input_kinds("mean", tensor.mean)


@_kind("cast")
def _cast(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    dst = attrs["dst"]
    return {"out": _out(tensor.cast(_leaf(inputs["x"]), FLOAT_FORMATS[dst]).data, dst)}


@_kind("cast.backward")
def _cast_backward(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    x = inputs["x"]
    node = tensor.cast(_leaf(x, True), FLOAT_FORMATS[attrs["dst"]])
    (grad,) = node.backward_rule(np.asarray(inputs["grad"].data), _ROOT)
    return {"grad_x": _out(grad, x.fmt)}


@_kind("softmax_cross_entropy")
def _softmax_cross_entropy(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    node = tensor.softmax_cross_entropy(_leaf(inputs["logits"]), np.asarray(inputs["labels"].data))
    return {"out": _out(node.data, "fp32")}


@_kind("softmax_cross_entropy.backward")
def _softmax_cross_entropy_backward(
    backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]
) -> dict[str, Val]:
    node = tensor.softmax_cross_entropy(_leaf(inputs["logits"], True), np.asarray(inputs["labels"].data))
    (grad,) = node.backward_rule(np.asarray(inputs["grad"].data), _ROOT)
    return {"grad_logits": _out(grad, "fp32")}


@_kind("scale")
def _scale(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    x = inputs["x"]
    return {"out": _out(tensor.scale(_leaf(x), np.asarray(inputs["factor"].data)).data, x.fmt)}


@_kind("scale.backward")
def _scale_backward(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    x = inputs["x"]
    node = tensor.scale(_leaf(x, True), np.asarray(inputs["factor"].data))
    (grad,) = node.backward_rule(np.asarray(inputs["grad"].data), _ROOT)
    return {"grad_x": _out(grad, x.fmt)}


def _scale_value(value: Val) -> float:
    return float(np.asarray(value.data, dtype=np.uint32).view(np.float32))


@_kind("inv_scale")
def _inv_scale(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a non-power-of-two scale warns; here it is only a value
        inverse = StaticLossScaler(_scale_value(inputs["scale"])).inv_scale()
    return {"inv": _out(np.float32(inverse).view(np.uint32), "fp32")}


@_kind("unscale")
def _unscale(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    # As Trainer: found_inf looks at the gradients before unscaling (widening is exact, so the
    # FP32 copies tell the same); a reciprocal of exactly 1 leaves them untouched.
    inverse = np.asarray(inputs["inv_scale"].data)
    grads = {role: v for role, v in inputs.items() if role != "inv_scale"}
    found_inf = any(_nonfinite(v) for v in grads.values())
    unscaled = {role: v if float(inverse.view(np.float32)) == 1.0 else _out(sf.fp32.mul(v.data, inverse), "fp32")
                for role, v in grads.items()}
    return {**unscaled, "found_inf": _out(np.bool_(found_inf), "bool")}


def _nonfinite(value: Val) -> bool:
    return count_nonfinite(np.asarray(value.data), _fmt(value)) > 0


@_kind("sgd_step")
def _sgd_step(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    param, fmt = inputs["param"], _fmt(inputs["param"])
    optimizer = SGD(fmt, attrs["lr"], attrs["momentum"], attrs["weight_decay"])
    if "buffer" in inputs:
        optimizer.state = {"momentum_buffer": [np.asarray(inputs["buffer"].data)]}
    (new,), _ = optimizer.step([np.asarray(param.data)], [np.asarray(inputs["grad"].data)])
    outputs = {"param": _out(new, param.fmt)}
    if "momentum_buffer" in optimizer.state:
        outputs["buffer"] = _out(optimizer.state["momentum_buffer"][0], param.fmt)
    return outputs


@_kind("adam_step")
def _adam_step(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    param, fmt = inputs["param"], _fmt(inputs["param"])
    optimizer = Adam(fmt, attrs["lr"], (attrs["beta1"], attrs["beta2"]), attrs["eps"], attrs["weight_decay"])
    _, meta = optimizer.state_dict()
    meta["beta_powers"] = [int(np.asarray(inputs[f"beta{i}_power"].data)) for i in (1, 2)]
    meta["steps"] = int(np.asarray(inputs["step"].data))
    arrays = {"exp_avg.0": np.asarray(inputs["exp_avg"].data), "exp_avg_sq.0": np.asarray(inputs["exp_avg_sq"].data)}
    optimizer.load_state_dict(arrays, meta)
    (new,), _ = optimizer.step([np.asarray(param.data)], [np.asarray(inputs["grad"].data)])
    meta = optimizer.state_dict()[1]
    powers = meta["beta_powers"]
    return {
        "param": _out(new, param.fmt),
        "exp_avg": _out(optimizer.state["exp_avg"][0], param.fmt),
        "exp_avg_sq": _out(optimizer.state["exp_avg_sq"][0], param.fmt),
        "beta1_power": _out(np.asarray(powers[0]), param.fmt),
        "beta2_power": _out(np.asarray(powers[1]), param.fmt),
        "step": _out(np.int64(meta["steps"]), "int64"),
    }


@_kind("scaler_update")
def _scaler_update(backend: EmulatorBackend, inputs: dict[str, Val], attrs: dict[str, Any]) -> dict[str, Val]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaler = DynamicLossScaler(init_scale=_scale_value(inputs["scale"]), **attrs)
    state = scaler.state_dict()
    state["_growth_tracker"] = int(np.asarray(inputs["growth_tracker"].data))
    scaler.load_state_dict(state)
    scaler.update(bool(np.asarray(inputs["found_inf"].data)))
    return {
        "scale": _out(np.float32(scaler.scale).view(np.uint32), "fp32"),
        "growth_tracker": _out(np.int32(scaler.growth_tracker), "int32"),
    }


class EmulatorBackend:
    """sim's side of every op kind (see :data:`KINDS`).

    ``tensor_core``: ``None`` for sim's matmul (sequential FP32 accumulation), or a GPU name, an
    instruction preset or a :class:`softfloat16.linalg.TensorCore` to run the GEMMs of ``matmul``
    and ``matmul.backward`` on its matrix unit instead (to judge a cuBLAS run;
    softfloat16.tensor_cores.gemm_policy: FP32 operands of a named GPU run in FMA loops).
    """

    name = "emulator"

    def __init__(self, tensor_core: linalg.TensorCore | str | None = None) -> None:
        self.tensor_core = None if tensor_core is None else tensor_cores.checked(tensor_core)

    def from_bits(self, bits: np.ndarray, fmt: str) -> np.ndarray:
        return np.asarray(bits, dtype=storage_dtype(fmt))

    def to_bits(self, data: np.ndarray, fmt: str) -> np.ndarray:
        return np.asarray(data, dtype=storage_dtype(fmt))

    @property
    def impl(self) -> str:
        """``sim``, or ``sim+h100`` (the GPU or instruction's name), ``sim+tensorcore(16,25)`` (a
        TensorCore's block and fraction bits) when the GEMMs run on a matrix unit."""
        core = self.tensor_core
        if core is None:
            return "sim"
        if isinstance(core, linalg.TensorCore):
            return f"sim+tensorcore({core.products_per_block},{core.fraction_bits})"
        return f"sim+{getattr(core, 'name', core)}"

    def run(self, kind: str, inputs: dict[str, Val], attrs: dict[str, Any]) -> tuple[dict[str, Val], str]:
        if kind not in KINDS:
            raise ValueError(f"unknown op kind {kind!r}")
        return KINDS[kind](self, inputs, attrs), self.impl


def replay(records: list[OpRecord], backend: EmulatorBackend, sources: Callable[[OpRecord], dict] | None = None
           ) -> list[OpRecord]:
    """The emulator's records for the same ops, each computed from ``records``' own inputs.

    ``sources(record)``, if given, supplies the emulator's own values of a ``source`` op (its
    initial weights and batches, {role: (bits, fmt)}); without it sources are skipped. ``state``
    ops (final weights) are skipped: they are not computed by an op.
    """
    replayed = []
    for record in records:
        if record.kind == "state" or (record.kind == "source" and sources is None):
            continue
        recorder = Recorder(backend)
        recorder.step = record.step
        if record.kind == "source":
            recorder.source(record.name, sources(record))
        else:
            inputs = {role: Val(backend.from_bits(bits, fmt), fmt) for role, fmt, bits in record.inputs}
            recorder.run(record.kind, record.name, inputs, **record.attrs)
        replayed.extend(recorder.records)
    return replayed
