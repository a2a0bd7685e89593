"""The dispatch mode: every aten op of the wrapped code, forward and backward, passes through
:meth:`EmulationMode.__torch_dispatch__`, which computes it on the emulator, lets torch run it
(data movement), or reports it as not emulated."""
from __future__ import annotations

import functools
from collections import Counter

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from softfloat16.formats import Format
from softfloat16.linalg import TensorCore

from . import (  # noqa: F401  (register their ops)
    activations, amp, attention, channel_norms, conv, cumulative, division, dropout, elementwise, foreach, grouped,
    linear, log1p, losses, normalization, norms, pooling, ranges, reductions, rnn, scatter, softmax, trig)
from . import smooth_losses  # noqa: F401  (registers its ops)
from . import distances, fused_optim, weight_norm  # noqa: F401  (register their ops)
from .machine import Machine
from .recipes import OpRoles
from . import registry
from .registry import IMPLEMENTATIONS, NATIVE, EmulationError, NotEmulated, NotEmulatedError
from .tensors import is_emulated

__all__ = ["EmulationError", "EmulationMode", "NotEmulatedError", "emulate"]


def _tensors(value):
    """The tensors among an aten call's arguments (nested in tuples, lists and dicts: what aten
    signatures hold; pytree's general walk costs more than a small op's arithmetic)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _devices(tensors, kwargs) -> set[str]:
    found = {t.device.type for t in tensors}
    device = kwargs.get("device")
    if device is not None:
        found.add(torch.device(device).type)
    return found


class EmulationMode(TorchDispatchMode):
    """A TorchDispatchMode computing aten ops of CPU float16/bfloat16/float32/float8 tensors on
    the emulator. Build it with :func:`emulate`.

    Attributes: ``machine`` (the rounding rules, :class:`~softfloat16.torch.machine.Machine`),
    ``strict``, ``fallbacks`` (a Counter: aten overload name -> calls that ran natively because
    the mode does not emulate them; empty under ``strict=True``).
    """

    def __init__(self, machine: Machine, strict: bool = True) -> None:
        super().__init__()
        if not isinstance(strict, bool):
            raise TypeError(f"strict: expected True or False, got {strict!r}")
        self.machine = machine
        self.strict = strict
        self.fallbacks: Counter[str] = Counter()
        self.seen = False  # whether an op with a tensor (or dtype=) of an emulated dtype ran

    def report(self) -> str:
        """The ops that fell back to torch, most frequent first (one line each).

        >>> EmulationMode(Machine()).report()
        'no op with an emulated dtype ran'
        """
        if not self.fallbacks:
            return "every op with emulated dtypes was emulated" if self.seen else "no op with an emulated dtype ran"
        total = sum(self.fallbacks.values())
        lines = [f"{total} call(s) of {len(self.fallbacks)} op(s) ran natively in torch (not emulated):"]
        lines += [f"  {name}: {count}" for name, count in self.fallbacks.most_common()]
        return "\n".join(lines)

    def _into_out(self, implementation, func, outs: tuple[str, ...], args, kwargs):
        """An ``out=`` overload: the functional overload torch would pick for the same arguments,
        computed by the mode, its results converted (by the machine) into the ``out`` tensors'
        dtypes and copied into them (resized as torch resizes them)."""
        targets = [kwargs[name] for name in outs]
        rest = {k: v for k, v in kwargs.items() if k not in outs}
        packet = func.overloadpacket
        try:
            overload = torch._C._jit_resolve_packet(f"aten::{packet.__name__}", *args, **rest)
        except RuntimeError:
            raise NotEmulated(f"no functional form of {func}") from None
        functional = getattr(packet, overload, None)
        if functional is None or _out_arguments(functional):
            raise NotEmulated(f"no functional form of {func}")
        result = implementation(self.machine, functional, args, rest)
        results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(results) != len(targets) or not all(isinstance(r, torch.Tensor) for r in results):
            raise NotEmulated(f"{func}: {len(targets)} out= tensor(s) for {len(results)} result(s)")
        for target, value in zip(targets, results):
            if value.dtype != target.dtype:
                if not is_emulated(target.dtype):
                    raise NotEmulated(f"{func}: a result of {value.dtype} written into out= of {target.dtype}")
                value = self.machine.convert(value, target.dtype)
            if target.shape != value.shape:
                target.resize_(value.shape)
            target.copy_(value)
        return targets[0] if len(targets) == 1 else tuple(targets)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = list(_tensors((args, kwargs)))
        devices = _devices(tensors, kwargs)
        if devices - {"cpu", "meta"}:
            other = sorted(devices - {"cpu", "meta"})[0]
            raise EmulationError(
                f"softfloat16.torch.emulate computes on the CPU; {func} got a {other} tensor. Move the model and "
                f"its inputs to the CPU (model.cpu(), x.cpu()) inside emulate(); run on {other} outside it.")
        if "meta" in devices:  # shapes only, no values to compute
            return func(*args, **kwargs)
        if not self.seen:
            self.seen = any(is_emulated(t.dtype) for t in tensors) or is_emulated(kwargs.get("dtype"))
        packet = func.overloadpacket
        implementation = IMPLEMENTATIONS.get(packet)
        reason = None
        if implementation is not None:
            try:
                outs = _out_arguments(func)
                if self.machine.recipe is not None:  # which GEMM operands are gradients (recipes.OpRoles)
                    self.machine.roles = OpRoles(func, args)
                if outs and any(kwargs.get(name) is not None for name in outs):
                    return self._into_out(implementation, func, outs, args, kwargs)
                return implementation(self.machine, func, args, kwargs)
            except NotEmulated as error:
                reason = str(error)
            finally:
                self.machine.roles = None
        elif packet in NATIVE:
            return func(*args, **kwargs)
        involved = any(is_emulated(t.dtype) for t in tensors) or is_emulated(kwargs.get("dtype"))
        if not involved:
            result = func(*args, **kwargs)  # integers, booleans, float64: torch's own arithmetic
            outputs = [x for x in pytree.tree_leaves(result) if isinstance(x, torch.Tensor)]
            if not any(is_emulated(t.dtype) for t in outputs):
                return result
        if self.strict:
            why = f" ({reason})" if reason else ""
            raise NotEmulatedError(
                f"{func} is not emulated{why}; emulate(strict=False) runs it natively in torch and counts it in "
                "mode.fallbacks; docs/torch-ops.md lists the ops emulated (python -m softfloat16.torch ops)")
        self.fallbacks[str(func)] += 1
        return result if not involved else func(*args, **kwargs)


@functools.cache
def _out_arguments(func) -> tuple[str, ...]:
    """The names of an overload's ``out=`` arguments (``out``; ``values``, ``indices``...)."""
    return tuple(argument.name for argument in func._schema.arguments if argument.is_out)


def emulate(rounding: str = "rne", accumulate: Format | str = "fp32", order: str = "sequential",
            nan: str = "x86", ftz: bool = False, strict: bool = True, seed: int | None = None,
            tensor_core: TensorCore | str | None = None, gemm: str | None = None, scale_rule: str | None = None,
            grad_format: str | None = None, grad_rounding: str | None = None, threads: int = 1) -> EmulationMode:
    """A context manager running every arithmetic aten op of CPU float16 / bfloat16 / float32 /
    float8 tensors on the emulator (docs/torch.md: the semantics, op by op).

    - ``rounding``: "rne" "rna" "rtz" "rup" "rdn" "rod", or "sr" (stochastic, with ``seed``) for
      the final rounding into 16- and 8-bit formats.
    - ``accumulate``: the accumulation format of matmuls and sums (default FP32); ``order``:
      "sequential", "pairwise" or "tensorcore" (which needs ``tensor_core``: a GPU such as "h100"
      or "a100", an architecture, an instruction preset of softfloat16.mma, or a
      :class:`~softfloat16.linalg.TensorCore`: softfloat16.tensor_cores).
    - ``nan``: NaN profile ("x86" is torch CPU's), ``ftz``: flush tiny results to zero.
    - ``strict``: an op the mode does not implement raises :class:`NotEmulatedError` naming it;
      with ``strict=False`` it runs natively and is counted in ``mode.fallbacks``.
    - ``gemm``: a low-precision GEMM recipe ("mxfp8", "mxfp6", "mxfp4", "nvfp4", "fp8_tensorwise",
      "fp8_rowwise"; softfloat16.torch.recipes) run on ``tensor_core``'s instructions, with
      ``scale_rule`` ("floor" or "rceil", MX recipes), ``grad_format`` and ``grad_rounding``
      ("rne" or "sr" with ``seed``) for the gradient operands of backward GEMMs.
    - ``threads``: the torch CPU thread count whose results to reproduce where a kernel's sums
      depend on it (channels-last batch norm); default 1. The process's own count is never read,
      so the bits are the same everywhere.

    An option that would have no effect is an error (``seed`` without stochastic rounding,
    ``tensor_core`` without order="tensorcore" or a recipe, recipe options without ``gemm``).

    >>> import torch
    >>> x = torch.tensor([1.0, 3.0], dtype=torch.bfloat16)
    >>> with emulate(rounding="rtz"):
    ...     (x / 3).tolist()          # 1/3 truncated to BF16
    [0.33203125, 1.0]
    """
    machine = Machine(rounding=rounding, accumulate=accumulate, order=order, nan=nan, ftz=ftz, seed=seed,
                      tensor_core=tensor_core, gemm=gemm, scale_rule=scale_rule, grad_format=grad_format,
                      grad_rounding=grad_rounding, threads=threads)
    return EmulationMode(machine, strict=strict)


registry._MODE = EmulationMode
