"""Run a PyTorch model on the emulator: ``softfloat16.torch.emulate`` is a TorchDispatchMode that
computes every arithmetic aten op of CPU float16 / bfloat16 / float32 (and float8) tensors with
softfloat16, bit-exactly and deterministically; ops that only move data run natively.
docs/torch.md describes, op by op, what is rounded where.

>>> import torch, softfloat16.torch as sft
>>> x = torch.tensor([1.0, 2.0**-11], dtype=torch.float16)
>>> with sft.emulate(rounding="rup") as mode:
...     y = x + 1.0
>>> y.tolist(), dict(mode.fallbacks)
([2.0, 1.0009765625], {})
"""
from __future__ import annotations

try:
    import torch  # noqa: F401  (absolute: the real PyTorch, not this package)
except ImportError:  # pragma: no cover - exercised by tests/test_torch_mode.py in a subprocess
    raise ImportError(
        'softfloat16.torch needs PyTorch; install it with: pip install -e ".[crosscheck]" '
        "(in the softfloat16 checkout)") from None

from .machine import Machine
from .mode import EmulationError, EmulationMode, NotEmulatedError, emulate
from .recording import TraceError, load_trace, record
from .registry import IMPLEMENTATIONS, NATIVE
from .tensors import DTYPE_FORMATS

__all__ = ["DTYPE_FORMATS", "EmulationError", "EmulationMode", "IMPLEMENTATIONS", "Machine", "NATIVE",
           "NotEmulatedError", "TraceError", "emulate", "load_trace", "record"]
