"""torch.amp.GradScaler's two aten ops: unscale with the inf/NaN check, and the scale update.

Both follow torch 2.13's CPU kernels step for step, with the emulator doing the rounding:

- ``_amp_foreach_non_finite_check_and_unscale_``: for every gradient tensor, ``found_inf`` becomes
  1.0 if any element is inf or NaN; every element is multiplied by ``inv_scale`` (an FP32 step,
  one rounding into the gradient's format), or left as it is when ``inv_scale`` is exactly 1.
- ``_amp_update_scale_``: inf/NaN found: ``scale * backoff_factor``, tracker reset; otherwise the
  tracker counts the clean step, and at ``growth_interval`` the scale becomes ``scale *
  growth_factor`` if that is finite. The factors are doubles: the product is formed in double on
  the host (exact for the power-of-two factors GradScaler uses) and rounded into FP32 by the machine.
"""
from __future__ import annotations

import numpy as np
import torch

from .machine import FP32
from .registry import NotEmulated, implements
from .tensors import DTYPE_FORMATS, bits, from_bits

_ONE32 = np.uint32(0x3F800000)


def _single(tensor: torch.Tensor, role: str) -> np.uint32:
    if tensor.dtype != torch.float32 or tensor.numel() != 1:
        raise NotEmulated(f"{role} must be a one-element float32 tensor, got {tensor.dtype} {tuple(tensor.shape)}")
    return bits(tensor).reshape(())


@implements("_amp_foreach_non_finite_check_and_unscale_", inplace=False)
def non_finite_check_and_unscale(machine, func, args, kwargs):
    """``GradScaler.unscale_``: ``found_inf = 1`` if any gradient element is inf or NaN; each element
    times ``inv_scale``, one FP32 step, one rounding into the gradient's dtype (torch CPU's kernel)."""
    grads, found_inf, inv_scale = args[0], args[1], args[2]
    inverse = _single(inv_scale, "inv_scale")
    _single(found_inf, "found_inf")
    for grad in grads:
        fmt = DTYPE_FORMATS.get(grad.dtype)
        if fmt is None:
            raise NotEmulated(f"a gradient of dtype {grad.dtype}")
        patterns = bits(grad)
        if not np.all(fmt.is_finite(patterns)):
            found_inf.fill_(1.0)
        if inverse != _ONE32:
            product = machine.mul(machine.widen(patterns, fmt), inverse)
            grad.copy_(from_bits(machine.narrow(product, fmt), grad.dtype, grad.shape))
    return None


@implements("_amp_update_scale_", inplace=False)
def update_scale(machine, func, args, kwargs):
    """``GradScaler.update``: ``scale * backoff_factor`` after an inf/NaN, else ``scale * growth_factor``
    every ``growth_interval`` clean steps if finite (the double product rounded into FP32 by the machine)."""
    scale, tracker, found_inf = args[0], args[1], args[2]
    growth, backoff, interval = (float(args[3]), float(args[4]), int(args[5]))
    current = np.uint32(_single(scale, "scale")).view(np.float32)
    if float(_single(found_inf, "found_inf").view(np.float32)) != 0.0:
        scale.copy_(from_bits(FP32.from_float(np.float64(current) * backoff, **machine.step), torch.float32, ()))
        tracker.fill_(0)
        return scale
    successful = int(tracker.item()) + 1
    if successful == interval:
        grown = np.asarray(FP32.from_float(np.float64(current) * growth, **machine.step))
        if FP32.is_finite(grown):
            scale.copy_(from_bits(grown, torch.float32, ()))
        tracker.fill_(0)
    else:
        tracker.fill_(successful)
    return scale
