"""Dropout (``native_dropout`` and its backward) on the emulator: the mask is torch's own draw
(``bernoulli_(1 - p)`` from torch's generator, so a ``torch.manual_seed`` gives native torch's mask),
the kept values scaled in one FP32 step and rounded once into the dtype.
"""
from __future__ import annotations

import numpy as np
import torch

from .elementwise import ONE32
from .machine import Machine, scalar_bits
from .opmath import ZERO32, constant32, result32, widen32
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, is_emulated

__all__ = ["native_dropout", "native_dropout_backward"]


def _scaled_by_mask(machine: Machine, x: torch.Tensor, mask: torch.Tensor, scale32, op: str) -> torch.Tensor:
    """``x * mask * scale``: the mask (0 or 1) applied exactly, then one FP32 multiplication by
    the FP32 pattern ``scale32``, one rounding."""
    x32 = widen32(machine, x, op, "input")
    keep = np.where(mask.detach().contiguous().numpy().astype(bool), ONE32, ZERO32)
    kept = machine.mul(x32, np.broadcast_to(keep, x32.shape))
    return result32(machine, machine.mul(kept, scale32), x.dtype, x.shape)


@implements("native_dropout", inplace=False)
def native_dropout(machine, func, args, kwargs):
    """Dropout: ``mask = bernoulli(1 - p)`` drawn by torch exactly as its CPU ``native_dropout``
    draws it (same generator, same call), then ``x * mask * scale`` with ``scale = 1 / (1 - p)``
    (0 for ``p = 1``) converted to the input's dtype first, as torch 2.13 CPU does (measured: a
    float16 dropout scales by float16(1/0.9), not float32(1/0.9)), one FP32 multiplication, one
    rounding. ``train=False`` returns a copy of the input and an all-true mask."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    p, train = aten_arg(args, kwargs, 1, "p"), aten_arg(args, kwargs, 2, "train")
    if x.numel() == 0:
        return func(*args, **kwargs)
    if train is not None and not train:
        return x.clone(), torch.ones_like(x, dtype=torch.bool)
    keep = 1.0 - p
    scale = 0.0 if keep == 0 else 1.0 / keep
    # The draw native torch makes (aten/src/ATen/native/Dropout.cpp): one bernoulli_ per element
    # on a tensor shaped like the input, from the default generator.
    mask = torch.empty_like(x, dtype=torch.bool).bernoulli_(keep)
    fmt = DTYPE_FORMATS[x.dtype]
    scale32 = machine.widen(scalar_bits(scale, fmt, machine.nan), fmt)
    return _scaled_by_mask(machine, x, mask, scale32, "native_dropout"), mask


@implements("native_dropout_backward", inplace=False)
def native_dropout_backward(machine, func, args, kwargs):
    """``grad * mask * float32(scale)``: the mask applied exactly, one FP32 multiplication by the
    scale as a float32 (not converted to the dtype, unlike the forward: torch 2.13 CPU, measured),
    one rounding."""
    grad, mask = args[0], args[1]
    scale = aten_arg(args, kwargs, 2, "scale")
    if not is_emulated(grad.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    if mask.shape != grad.shape:
        mask = mask.expand(grad.shape)
    return _scaled_by_mask(machine, grad, mask, constant32(scale), "native_dropout_backward")
