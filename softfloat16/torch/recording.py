"""A recorded op trace of any PyTorch run: ``softfloat16.torch.record(path)``.

:func:`record` is a TorchDispatchMode that keeps, for every aten op the wrapped code runs
(forward and backward, on any device, with or without :func:`~softfloat16.torch.emulate`), its
name, the bits of its tensor arguments and results, its other arguments, and, given the model,
the module it ran in. On exit it writes one file in the core's op-trace schema
(:mod:`softfloat16.optrace`, the schema of sim's cross-check dumps too: plain arrays and JSON,
SHA-256 checked, no pickle) that :mod:`softfloat16.torch.trace_compare` (``python -m
softfloat16.torch compare``) compares op by op with another trace, recorded on another machine for
instance.

The file's metadata: ``kind`` = ``"softfloat16-torch-trace"`` (not the cross-check's own kind:
its ops are aten ops, not the cross-check's op kinds), ``schema_version`` 1, ``side``
(``"emulator"`` when recorded inside ``emulate()``, else ``"torch"``), ``mode`` (``"emulated"``
or ``"native"``), ``device`` (library versions, host, GPUs), ``settings`` (the emulator's
machine, torch's precision switches), ``config`` (the model's class), ``steps`` (the op count)
and ``ops``: one entry per op, ``{"step": position, "name": "aten.addmm.default", "kind":
"aten", "impl", "attrs", "inputs": [[role, format, array], ...], "outputs": [...]}``. Roles are
the aten schema's argument names (``self``, ``mat1``, ``tensors.0`` for a list element) and
``out`` / ``out.0``, ``out.1``... for results. ``attrs`` holds ``module`` (the module path,
``""`` for the model itself, None outside it or without a model), ``phase`` (``"backward"``
inside autograd's backward pass, else ``"forward"``), ``node`` (the autograd node, in backward),
``args`` / ``kwargs`` (the call's arguments, a tensor written as ``{"tensor": role}``),
``result``, and ``write_only`` (arguments the op overwrites without reading: ``out=``,
``copy_``'s ``self``). Formats (the op-trace table, ``softfloat16.optrace.VALUE_FORMATS``):
``fp16 bf16 fp32 fp64 fp8_e4m3fn fp8_e5m2 fp8_e4m3fnuz fp8_e5m2fnuz e8m0`` (bit patterns as
unsigned integers of the width) and ``bool uint8 int8 int16 int32 int64 complex64 complex128``
(values).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "trace.npz")
>>> x = torch.tensor([1.0, -2.0], dtype=torch.float16)
>>> with record(path):
...     y = torch.relu(x * 3)
>>> trace = load_trace(path)
>>> [op.name for op in trace.ops], trace.ops[1].inputs[0][2], trace.ops[1].outputs[0][2]
(['aten.mul.Tensor', 'aten.relu.default'], array([16896, 50688], dtype=uint16), array([16896,     0], dtype=uint16))
"""
from __future__ import annotations

import dataclasses
import functools
import os
import platform
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes, _get_current_dispatch_mode_stack

import softfloat16
from softfloat16.mma_presets import Preset
from softfloat16.optrace import (
    SCHEMA_VERSION, TRACE_KIND, VALUE_FORMATS, OpTrace, OpTraceError, TracedOp, Value, fail, load_op_trace,
    save_op_trace, storage_dtype,
)

from softfloat16.tensor_cores import TensorCore

from .mode import EmulationMode
from .registry import IMPLEMENTATIONS
from .tensors import DTYPE_FORMATS, INTEGER_VIEWS, TRACE_DTYPES, trace_format

__all__ = ["SCHEMA_VERSION", "TRACE_KIND", "UNINITIALIZED", "NotReplayable", "Trace", "TraceError", "TraceOp",
           "TraceRecorder", "Value", "decode", "encode", "load_trace", "machine_settings", "record", "save_trace",
           "storage_dtype", "tensor_from_value", "tensor_value"]

_NODE_KEY = "softfloat16.module"  # where a module path is written on the autograd nodes it created
# Ops whose results are uninitialized memory: recorded without their values, never compared.
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
                           "empty_permuted"})
# In-place ops that overwrite ``self`` without reading it.
_OVERWRITE_SELF = frozenset({"copy_", "fill_", "zero_", "uniform_", "normal_", "bernoulli_", "random_",
                             "exponential_", "geometric_", "cauchy_", "log_normal_"})

#: A trace file is unreadable, truncated, corrupt, of another kind or schema, or inconsistent (a
#: ValueError; the op-trace reader's own error, so either name catches it).
TraceError = OpTraceError


def tensor_value(tensor: torch.Tensor) -> tuple[str, np.ndarray] | None:
    """``(format, array)``: a copy of a dense tensor's values (floating dtypes as bit patterns), on
    the host, in row-major order; None for what has no values here (meta, sparse, other dtypes).

    >>> tensor_value(torch.tensor([[1.0], [-0.0]], dtype=torch.bfloat16))
    ('bf16', array([[16256],
           [32768]], dtype=uint16))
    """
    dtype = tensor.dtype
    fmt = trace_format(dtype)
    if fmt is None or tensor.layout != torch.strided or tensor.device.type == "meta":
        return None
    try:
        with _disable_current_modes(), torch.no_grad():  # our own copies are no ops of the run
            values = tensor.detach()
            if values.device.type != "cpu":
                values = values.cpu()
            values = values.resolve_conj().resolve_neg().contiguous()
            if VALUE_FORMATS[fmt].bits:
                array = values.view(INTEGER_VIEWS[dtype.itemsize]).numpy().view(storage_dtype(fmt))
            else:
                array = values.numpy()
            return fmt, np.array(array, copy=True)  # a copy: later in-place ops must not change it
    except (RuntimeError, TypeError, NotImplementedError):  # tensor subclasses without storage
        return None


def tensor_from_value(fmt: str, array: np.ndarray) -> torch.Tensor:
    """A new CPU tensor holding a trace value (the inverse of :func:`tensor_value`).

    >>> tensor_from_value("fp16", np.array([0x3C00, 0xFC00], np.uint16))
    tensor([1., -inf], dtype=torch.float16)
    """
    dtype = TRACE_DTYPES[fmt]
    array = np.array(array, dtype=storage_dtype(fmt), order="C", copy=True)
    if VALUE_FORMATS[fmt].bits:  # through the signed integer of the width: torch has few unsigned dtypes
        signed = np.dtype(np.uint8) if array.itemsize == 1 else np.dtype(f"i{array.itemsize}")
        return torch.from_numpy(array.view(signed)).view(dtype)
    return torch.from_numpy(array)


# --- the trace in memory and on disk (the core's op-trace schema) --------------------------


@dataclasses.dataclass
class TraceOp(TracedOp):
    """One recorded op (the fields of :class:`softfloat16.optrace.TracedOp`): its position, aten
    name, how it was computed, its arguments and values."""

    @property
    def module(self) -> str | None:
        """The module path the op ran in (``""``: the model itself; None: outside it, or no model)."""
        return self.attrs.get("module")

    @property
    def phase(self) -> str:
        """``"backward"`` inside autograd's backward pass, else ``"forward"``."""
        return self.attrs.get("phase", "forward")

    def where(self) -> str:
        """Module path and phase: ``module fc1, backward (AddmmBackward0)``."""
        module = self.module
        place = "" if module is None else ("module (the model), " if module == "" else f"module {module}, ")
        node = self.attrs.get("node")
        return place + self.phase + (f" ({node})" if node else "")

    def label(self) -> str:
        """``op 7 aten.addmm.default [module fc1, forward]``."""
        return f"op {self.step} {self.name} [{self.where()}]"


@dataclasses.dataclass
class Trace(OpTrace):
    """A loaded trace: its ops in the order they ran, and the run's description (``steps``: the op
    count)."""

    kind: str = TRACE_KIND

    def describe(self) -> str:
        """One line: library, device, native or emulated (with the machine), op count."""
        device = self.device
        where = ", ".join(device.get("devices", [])) or "no tensors"
        gpus = device.get("cuda", {}).get("devices")
        if gpus and "cuda" in where:
            where += f" ({', '.join(sorted(set(gpus)))})"
        machine = self.settings.get("machine")
        how = "native" if machine is None else "emulated: " + ", ".join(f"{k}={v}" for k, v in machine.items())
        return f"torch {device.get('torch', '?')} on {where}, {how}; {len(self.ops)} ops"


def save_trace(path: str | os.PathLike[str], trace: Trace) -> None:
    """Write ``trace`` to ``path`` atomically, each distinct array once (see the module doc)."""
    save_op_trace(path, dataclasses.replace(trace, steps=len(trace.ops)))


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and validate a trace written by :func:`record` (or :func:`save_trace`).

    Raises :class:`TraceError` naming the file and the problem: truncated or corrupt (the
    container's SHA-256 check), not a torch trace (a cross-check dump, a checkpoint), another
    schema version, or an inconsistent op list. A missing file raises FileNotFoundError.
    """
    trace = load_op_trace(path, TRACE_KIND, op_type=TraceOp, trace_type=Trace)
    machine = trace.settings.get("machine")
    if isinstance(machine, dict) and machine.get("order") != "tensorcore" and "gemm" not in machine:
        machine.pop("tensor_core", None)  # traces of earlier versions stored the unused default, "h100"
    if isinstance(machine, dict) and machine.get("rounding") != "sr" and machine.get("grad_rounding") != "sr":
        machine["seed"] = None  # and any seed given, which only stochastic rounding uses
    if trace.steps != len(trace.ops):
        raise fail(path, f"steps must be the op count {len(trace.ops)}, got {trace.steps}")
    for index, op in enumerate(trace.ops):
        if op.step != index or not op.impl:
            raise fail(path, f"op {index} ({op.name}): step must be its position {index} and impl non-empty, "
                             f"got {op.step!r} and {op.impl!r}")
    return trace


# --- arguments as JSON ----------------------------------------------------------------------


def encode(value: Any, role: str, values: list[Value] | None) -> Any:
    """An aten argument or result as JSON. A tensor becomes ``{"tensor": role}`` and its value is
    appended to ``values`` (``{"tensor": None, "dtype", "shape", "device"}`` when it has none to
    keep, or when ``values`` is None); dtypes, devices, layouts, memory formats and complex
    numbers are tagged objects; anything else is kept as ``{"repr": ...}``.

    >>> encode([2, 1.5, torch.float16, None], "size", [])
    [2, 1.5, {'dtype': 'float16'}, None]
    """
    if isinstance(value, torch.Tensor):
        captured = tensor_value(value) if values is not None else None
        if captured is None:
            return {"tensor": None, "dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                    "device": str(value.device)}
        values.append((role, *captured))
        return {"tensor": role}
    if isinstance(value, (list, tuple)):
        return [encode(item, f"{role}.{index}", values) for index, item in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return encode(value.item(), role, values)
    for kind, convert in ((torch.SymBool, bool), (torch.SymInt, int), (torch.SymFloat, float)):
        if isinstance(value, kind):
            return convert(value)
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    for kind, tag in ((torch.dtype, "dtype"), (torch.device, "device"), (torch.layout, "layout"),
                      (torch.memory_format, "memory_format")):
        if isinstance(value, kind):
            return {tag: str(value).removeprefix("torch.")}
    return {"repr": repr(value)}


class NotReplayable(Exception):
    """A recorded call cannot be rebuilt: a tensor without recorded values, or an argument kept
    only as its text."""


def decode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The inverse of :func:`encode` for a replay on the CPU: tensors from ``tensors`` by role,
    devices mapped to the CPU. Raises :class:`NotReplayable` for what cannot be rebuilt."""
    if isinstance(value, list):
        return [decode(item, tensors) for item in value]
    if not isinstance(value, dict):
        return value
    if "tensor" in value:
        if value["tensor"] not in tensors:
            raise NotReplayable(f"a {value.get('dtype')} tensor on {value.get('device')} without recorded values")
        return tensors[value["tensor"]]
    if "dtype" in value:
        return getattr(torch, value["dtype"])
    if "device" in value:
        return torch.device("cpu")  # a replay runs on the emulator, on the host
    if "layout" in value:
        return getattr(torch, value["layout"])
    if "memory_format" in value:
        return getattr(torch, value["memory_format"])
    if "complex" in value:
        return complex(*value["complex"])
    raise NotReplayable(f"an argument recorded only as {value.get('repr', value)!r}")


# --- the recorder ---------------------------------------------------------------------------


def _is_view(func) -> bool:
    """True for an op whose every result aliases an input without writing to it (a view)."""
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


class _ModulePaths:
    """Which module of ``model`` an op runs in. Forward: a stack kept by forward pre/post hooks
    on every submodule. Backward: each module, as its forward ends, writes its path on the
    autograd nodes it created (those between its outputs and its inputs not yet claimed by a
    submodule), and an op in backward reads it from ``torch._C._current_autograd_node()``."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.stack: list[tuple[str, set]] = []
        self.handles = []
        for path, module in model.named_modules():
            self.handles.append(module.register_forward_pre_hook(functools.partial(self._enter, path)))
            self.handles.append(module.register_forward_hook(functools.partial(self._leave, path), always_call=True))

    @staticmethod
    def _grad_fns(values) -> set:
        return {t.grad_fn for t in pytree.tree_leaves(values) if isinstance(t, torch.Tensor) and t.grad_fn is not None}

    def _enter(self, path: str, module, args) -> None:
        # The inputs' nodes as they are now (an in-place module rewrites its input's grad_fn).
        self.stack.append((path, self._grad_fns(args)))

    def _leave(self, path: str, module, args, output) -> None:
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == path:
                _, boundary = self.stack.pop(index)
                break
        else:
            return
        todo, seen = list(self._grad_fns(output)), set()
        while todo:
            node = todo.pop()
            if node in seen or node in boundary:
                continue
            seen.add(node)
            node.metadata.setdefault(_NODE_KEY, path)  # inner modules finish first: theirs is kept
            todo.extend(next_node for next_node, _ in node.next_functions if next_node is not None)

    def where(self) -> tuple[str | None, str, str | None]:
        """(module path, phase, autograd node name) of the op running now."""
        node = _backward_node()
        if node is False:
            return (self.stack[-1][0] if self.stack else None), "forward", None
        if node is None:
            return None, "backward", None
        return node.metadata.get(_NODE_KEY), "backward", node.name()

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


def _backward_node():
    """False outside autograd's backward pass; in it, the autograd node running (None if none
    is, or if this torch cannot tell)."""
    task = getattr(torch._C, "_current_graph_task_id", None)  # torch >= 2.1
    if task is None or task() == -1:
        return False
    current = getattr(torch._C, "_current_autograd_node", None)
    return None if current is None else current()


def _outside_backward() -> tuple[None, str, str | None]:
    node = _backward_node()
    if node is False:
        return None, "forward", None
    return None, "backward", None if node is None else node.name()


def _library_versions() -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__, "numpy": np.__version__, "softfloat16": softfloat16.__version__,
        "python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine(),
        "processor": platform.processor(),
    }
    if torch.cuda.is_available():
        info["cuda"] = {"version": torch.version.cuda, "devices": [torch.cuda.get_device_name(i)
                                                                   for i in range(torch.cuda.device_count())]}
    return info


def _torch_switches() -> dict[str, Any]:
    """torch's global choices that change results: TF32, reduced-precision reductions, determinism."""
    matmul = torch.backends.cuda.matmul
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": matmul.allow_tf32,
        "cuda_matmul_allow_fp16_reduced_precision_reduction": matmul.allow_fp16_reduced_precision_reduction,
        "cuda_matmul_allow_bf16_reduced_precision_reduction": matmul.allow_bf16_reduced_precision_reduction,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "num_threads": torch.get_num_threads(),
    }


def _tensor_core_json(tensor_core: TensorCore | Preset | str) -> str | list[int]:
    """A GPU or instruction by name; a TensorCore as [products_per_block, fraction_bits, zero_exponent]."""
    if isinstance(tensor_core, TensorCore):
        return [tensor_core.products_per_block, tensor_core.fraction_bits, tensor_core.zero_exponent]
    return tensor_core.name if isinstance(tensor_core, Preset) else tensor_core


def machine_settings(mode: EmulationMode) -> dict[str, Any]:
    """An emulation mode's machine as JSON (what ``compare --replay`` rebuilds it from): the
    matrix unit only where it is used (order "tensorcore", or a recipe), the recipe's options only
    under a recipe."""
    machine = mode.machine
    settings = {"rounding": machine.rounding, "accumulate": machine.accumulate.name, "order": machine.order,
                "nan": machine.nan, "ftz": machine.ftz, "seed": machine.seed}
    if machine.tensor_core is not None:
        settings["tensor_core"] = _tensor_core_json(machine.tensor_core)
    if machine.recipe is not None:
        settings.update(machine.recipe.settings())
    if machine.threads != 1:
        settings["threads"] = machine.threads
    return {**settings, "strict": mode.strict}


class TraceRecorder(TorchDispatchMode):
    """The dispatch mode of :func:`record`. After the ``with`` block, ``trace`` holds what was
    written to ``path`` (``views_skipped``: the view ops left out)."""

    def __init__(self, path: str | os.PathLike[str], model: torch.nn.Module | None = None, views: bool = False
                 ) -> None:
        super().__init__()
        self.path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            raise ValueError(f"path: the directory {directory!r} of {self.path!r} does not exist")
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(views, bool):
            raise TypeError(f"views: expected True or False, got {views!r}")
        self.model, self.views = model, views
        self.ops: list[TraceOp] = []
        self.views_skipped = 0
        self.trace: Trace | None = None
        self._devices: set[str] = set()
        self._modules: _ModulePaths | None = None
        self._emulation: EmulationMode | None = None

    def __enter__(self):
        if self.ops or self.trace is not None:
            raise RuntimeError("a record() context records one run: make a new one for another")
        # An emulation mode entered earlier (outer) computes the ops this mode passes on: we see its results.
        outer = [m for m in _get_current_dispatch_mode_stack() if isinstance(m, EmulationMode)]
        self._emulation = outer[-1] if outer else None
        if self.model is not None:
            self._modules = _ModulePaths(self.model)
        try:
            return super().__enter__()
        except BaseException:
            self._remove_hooks()
            raise

    def __exit__(self, exc_type, exc_value, traceback):
        try:
            return super().__exit__(exc_type, exc_value, traceback)
        finally:
            self._remove_hooks()
            self.trace = self._trace()
            save_trace(self.path, self.trace)  # also after an error: the ops up to it

    def _remove_hooks(self) -> None:
        if self._modules is not None:
            self._modules.remove()

    def _trace(self) -> Trace:
        emulated = self._emulation is not None
        settings: dict[str, Any] = {"torch": _torch_switches(), "views_recorded": self.views,
                                    "views_skipped": self.views_skipped}
        if emulated:
            settings["machine"] = machine_settings(self._emulation)
        device = {**_library_versions(), "devices": sorted(self._devices)}
        config = {"model": None if self.model is None else type(self.model).__name__}
        return Trace(self.ops, "emulator" if emulated else "torch", "emulated" if emulated else "native", device,
                     settings, config)

    def _impl(self, func, device: str, fallbacks_before: int, values: list[Value]) -> str:
        """Who computed the op: ``softfloat16`` (the emulation mode's implementation), or torch on
        its device (``torch-cpu (not emulated)`` for an op the mode let torch run as a fallback)."""
        emulation = self._emulation
        if emulation is None or device != "cpu":
            return f"torch-{device}"
        if emulation.fallbacks[str(func)] > fallbacks_before:
            return "torch-cpu (not emulated)"
        emulated = any(TRACE_DTYPES[fmt] in DTYPE_FORMATS for _, fmt, _ in values)
        return "softfloat16" if emulated and func.overloadpacket in IMPLEMENTATIONS else "torch-cpu"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.views and _is_view(func):
            self.views_skipped += 1
            return func(*args, **kwargs)
        module, phase, node = self._modules.where() if self._modules is not None else _outside_backward()
        tensors = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        devices = {t.device.type for t in tensors}
        if "device" in kwargs and kwargs["device"] is not None:
            devices.add(torch.device(kwargs["device"]).type)
        self._devices |= devices - {"meta"}
        # Inputs before the call: an in-place op overwrites them.
        inputs: list[Value] = []
        names = [argument.name for argument in func._schema.arguments]
        encoded_args = [encode(value, names[i] if i < len(names) else f"arg{i}", inputs)
                        for i, value in enumerate(args)]
        encoded_kwargs = {name: encode(value, name, inputs) for name, value in kwargs.items()}
        fallbacks_before = self._emulation.fallbacks[str(func)] if self._emulation is not None else 0
        result = func(*args, **kwargs)
        outputs: list[Value] = []
        keep = func.overloadpacket.__name__ not in UNINITIALIZED
        attrs = {"module": module, "phase": phase}
        if node is not None:
            attrs["node"] = node
        # Arguments the op only writes (out=, copy_'s self): their old contents, often uninitialized
        # memory, are kept for a replay but are no input of the computation.
        write_only = [a.name for a in func._schema.arguments if a.is_out]
        if func.overloadpacket.__name__ in _OVERWRITE_SELF:
            write_only.append("self")
        if write_only:
            attrs["write_only"] = write_only
        attrs.update(args=encoded_args, kwargs=encoded_kwargs,
                     result=encode(result, "out", outputs if keep else None))
        device = "cpu" if not devices - {"meta"} else sorted(devices - {"meta"})[-1]  # cuda over cpu
        impl = self._impl(func, device, fallbacks_before, inputs + outputs)
        self.ops.append(TraceOp(len(self.ops), str(func), func.namespace, impl, attrs, inputs, outputs))
        return result


def record(path: str | os.PathLike[str], *, model: torch.nn.Module | None = None, views: bool = False
           ) -> TraceRecorder:
    """A context manager recording every aten op the wrapped code runs into the trace file
    ``path`` (written on exit, also after an error; see the module doc for the format).

    - ``model``: the ``nn.Module`` whose module paths (``"fc1"``, ``"layers.0.attn"``; ``""`` for
      the model itself) are written on each op, forward and backward.
    - ``views``: also record view ops (``view``, ``t``, ``transpose``, ``detach``...: results that
      alias an input without writing it). Off by default: a view computes nothing, and the op
      that reads it records the values it sees.

    Inside ``emulate()`` (entered first) the trace holds the emulated values and the machine's
    settings: ``with emulate(): with record(path): ...``. The other order records what the
    emulation mode hands to torch (its native ops and internal copies), not the model's ops.
    Runs on any device: CUDA values are copied to the host (which synchronises every op).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "trace.npz")
    >>> model, x = torch.nn.Linear(2, 1).half(), torch.ones(1, 2, dtype=torch.float16)
    >>> with record(path, model=model) as recorder:
    ...     model(x).sum().backward()
    >>> [(op.name, op.module, op.phase) for op in recorder.trace.ops][:2]
    [('aten.addmm.default', '', 'forward'), ('aten.sum.default', None, 'forward')]
    """
    return TraceRecorder(path, model=model, views=views)
