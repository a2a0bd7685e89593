"""The dispatch mode: every aten op of the wrapped code, forward and backward, passes through
:meth:`EmulationMode.__torch_dispatch__`, which computes it on the emulator, lets torch run it
(data movement), or reports it as not emulated."""
from __future__ import annotations

from collections import Counter

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from softfloat16.formats import Format
from softfloat16.linalg import TensorCore

from . import elementwise, linear, losses, reductions, softmax  # noqa: F401  (register their ops)
from .machine import Machine
from .registry import IMPLEMENTATIONS, NATIVE, NotEmulated
from .tensors import is_emulated

__all__ = ["EmulationError", "EmulationMode", "NotEmulatedError", "emulate"]


class EmulationError(RuntimeError):
    """An op the mode cannot run as asked (a tensor on a device other than the CPU)."""


class NotEmulatedError(EmulationError):
    """``strict=True`` and an op with emulated-dtype tensors that the mode does not implement."""


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

    def report(self) -> str:
        """The ops that fell back to torch, most frequent first (one line each).

        >>> EmulationMode(Machine()).report()
        'every op with emulated dtypes was emulated'
        """
        if not self.fallbacks:
            return "every op with emulated dtypes was emulated"
        total = sum(self.fallbacks.values())
        lines = [f"{total} call(s) of {len(self.fallbacks)} op(s) ran natively in torch (not emulated):"]
        lines += [f"  {name}: {count}" for name, count in self.fallbacks.most_common()]
        return "\n".join(lines)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = pytree.tree_leaves((args, kwargs))
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        devices = _devices(tensors, kwargs)
        if devices - {"cpu", "meta"}:
            other = sorted(devices - {"cpu", "meta"})[0]
            raise EmulationError(
                f"softfloat16.torch.emulate computes on the CPU; {func} got a {other} tensor. Move the model and "
                f"its inputs to the CPU (model.cpu(), x.cpu()) inside emulate(); run on {other} outside it.")
        if "meta" in devices:  # shapes only, no values to compute
            return func(*args, **kwargs)
        packet = func.overloadpacket
        implementation = IMPLEMENTATIONS.get(packet)
        reason = None
        if implementation is not None:
            try:
                return implementation(self.machine, func, args, kwargs)
            except NotEmulated as error:
                reason = str(error)
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
                "mode.fallbacks")
        self.fallbacks[str(func)] += 1
        return result if not involved else func(*args, **kwargs)


def emulate(rounding: str = "rne", accumulate: Format | str = "fp32", order: str = "sequential",
            nan: str = "x86", ftz: bool = False, strict: bool = True, seed: int | None = None,
            tensor_core: TensorCore | str = "h100") -> EmulationMode:
    """A context manager running every arithmetic aten op of CPU float16 / bfloat16 / float32 /
    float8 tensors on the emulator (docs/torch.md: the semantics, op by op).

    - ``rounding``: "rne" "rna" "rtz" "rup" "rdn" "rod", or "sr" (stochastic, with ``seed``) for
      the final rounding into 16- and 8-bit formats.
    - ``accumulate``: the accumulation format of matmuls and sums (default FP32); ``order``:
      "sequential", "pairwise" or "tensorcore" (``tensor_core``: a
      :class:`~softfloat16.linalg.TensorCore` or a preset name such as "h100").
    - ``nan``: NaN profile ("x86" is torch CPU's), ``ftz``: flush tiny results to zero.
    - ``strict``: an op the mode does not implement raises :class:`NotEmulatedError` naming it;
      with ``strict=False`` it runs natively and is counted in ``mode.fallbacks``.

    >>> import torch
    >>> x = torch.tensor([1.0, 3.0], dtype=torch.bfloat16)
    >>> with emulate(rounding="rtz"):
    ...     (x / 3).tolist()          # 1/3 truncated to BF16
    [0.33203125, 1.0]
    """
    machine = Machine(rounding=rounding, accumulate=accumulate, order=order, nan=nan, ftz=ftz, seed=seed,
                      tensor_core=tensor_core)
    return EmulationMode(machine, strict=strict)
