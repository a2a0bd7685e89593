"""torch's fused optimizer steps (``torch.optim.Adam/AdamW/Adagrad/SGD(fused=True)``): ``_fused_adam_``,
``_fused_adamw_``, ``_fused_adagrad_``, ``_fused_sgd_``, written as torch 2.13's CPU kernels compute them.

Each tensor of the lists is updated element by element in FP32 ("opmath": float16/bfloat16
parameters, gradients and states are widened exactly, the results rounded once into their dtype
when stored). torch's kernels run a vectorised loop over whole vectors of 8 FP32 or 16 16-bit
elements (the AVX2-width vectors torch 2.13 uses for them, measured on an AVX-512 machine) and a
scalar loop over the last ``n mod 8`` (FP32) or ``n mod 16`` (16-bit) elements; the two fuse
different products into the following addition (GCC's contractions, measured), and the mode
follows each on its elements. The doubles (``lr``, betas, ``eps``,
``weight_decay``) enter as torch forms them: bias corrections ``1 - beta**step``, their square root
and ``lr / bias_correction1`` in double on the host, then each constant rounded to float.

``grad_scale`` (GradScaler's scale, a one-element FP32 tensor) divides every gradient element (an
FP32 division), and the unscaled gradient is written back into ``grads``; a ``found_inf`` holding
1.0 skips the whole step, as torch does. The step count is the ``state_steps`` tensor's value.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .machine import FP32, Machine, scalar_bits
from .opmath import ARITHMETIC, constant32
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, bits, from_bits

__all__ = ["fused_adagrad", "fused_adam", "fused_sgd"]

#: Elements per vector of torch's fused optimizer loops, by element size (measured: the FP32 and
#: the 16-bit ``v`` update differ between the loops, and these boundaries match torch's results);
#: the last ``n mod lanes`` elements of a tensor go through the scalar loop.
_LANES = {4: 8, 2: 16}
_MINUS_ONE32 = constant32(-1.0)


def _vector_count(tensor: torch.Tensor) -> int:
    """How many leading elements of ``tensor`` torch's vectorised loop updates."""
    n = tensor.numel()
    return n - n % _LANES[tensor.element_size()]


def _checked(tensors, role: str, param: torch.Tensor, op: str) -> None:
    for tensor in tensors:
        if tensor.dtype != param.dtype or tensor.shape != param.shape:
            raise NotEmulated(f"{op}: {role} of {tensor.dtype} {tuple(tensor.shape)} for a parameter of "
                              f"{param.dtype} {tuple(param.shape)}")
        if not tensor.is_contiguous():
            raise NotEmulated(f"{op}: a non-contiguous {role}")


def _widened(machine: Machine, tensor: torch.Tensor) -> np.ndarray:
    return np.asarray(machine.widen(bits(tensor).reshape(-1), DTYPE_FORMATS[tensor.dtype]))


def _store(machine: Machine, tensor: torch.Tensor, values32: np.ndarray) -> None:
    """FP32 values rounded once into ``tensor``'s dtype and written into it."""
    fmt = DTYPE_FORMATS[tensor.dtype]
    tensor.copy_(from_bits(machine.narrow(np.asarray(values32, np.uint32), fmt), tensor.dtype, tensor.shape))


def _scale_and_skip(kwargs: dict, op: str):
    """``(grad_scale as an FP32 pattern or None, skip)``: skip when ``found_inf`` holds 1.0."""
    scale, found_inf = kwargs.get("grad_scale"), kwargs.get("found_inf")
    for name, tensor in (("grad_scale", scale), ("found_inf", found_inf)):
        if tensor is not None and (tensor.dtype != torch.float32 or tensor.numel() != 1):
            raise NotEmulated(f"{op}: {name} must be a one-element float32 tensor, got {tensor.dtype} "
                              f"{tuple(tensor.shape)}")
    skip = found_inf is not None and float(found_inf.reshape(-1)[0]) == 1.0
    return (None if scale is None else np.uint32(bits(scale).reshape(-1)[0])), skip


def _learning_rate(kwargs: dict) -> float:
    lr = kwargs["lr"]
    return float(lr.reshape(-1)[0].item()) if isinstance(lr, torch.Tensor) else float(lr)


def _unscaled(machine: Machine, grad: torch.Tensor, g: np.ndarray, scale) -> np.ndarray:
    """The gradient divided by ``grad_scale`` (an FP32 division), written back into ``grad``."""
    if scale is None:
        return g
    g = np.asarray(machine.div(g, scale))
    _store(machine, grad, g)
    return g


def _negated(machine: Machine, g: np.ndarray, v: int) -> np.ndarray:
    """``maximize``: the vectorised loop multiplies by -1, the scalar loop negates (a NaN keeps its
    sign in the first)."""
    return np.concatenate([np.asarray(machine.mul(g[:v], _MINUS_ONE32)), machine.neg(g[v:])])


def _joined(vector: np.ndarray, tail: np.ndarray, v: int) -> np.ndarray:
    return np.concatenate([np.asarray(vector)[:v], np.asarray(tail)[v:]])


@implements("_fused_adam_", "_fused_adamw_", inplace=False)
def fused_adam(machine, func, args, kwargs):
    """``_fused_adam_`` / ``_fused_adamw_`` (``Adam``/``AdamW(fused=True)``): per element, in FP32,
    ``g = grad / grad_scale``; ``-g`` if maximize; weight decay ``g += p * wd`` (Adam) or
    ``p *= 1 - lr * wd`` (AdamW); ``m = lerp(m, g, 1 - beta1)`` as one fma; ``v = v * beta2 +
    (1 - beta2) * g * g``; ``vmax = max(vmax, v)`` (amsgrad); ``p += -step_size * m / (sqrt(v) /
    sqrt(bias_correction2) + eps)``."""
    op = func.overloadpacket.__name__
    adamw = op == "_fused_adamw_"
    names = ("self", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs", "state_steps")
    params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = (
        list(aten_arg(args, kwargs, i, name, ())) for i, name in enumerate(names))
    amsgrad, maximize = bool(kwargs["amsgrad"]), bool(kwargs["maximize"])
    count = len(params)
    lists = {"grads": grads, "exp_avgs": exp_avgs, "exp_avg_sqs": exp_avg_sqs, "state_steps": steps}
    if amsgrad:
        lists["max_exp_avg_sqs"] = max_exp_avg_sqs
    elif max_exp_avg_sqs:
        raise RuntimeError(f"{op}: max_exp_avg_sqs must be empty without amsgrad")
    for role, tensors in lists.items():
        if len(tensors) != count:
            raise RuntimeError(f"{op}: {len(tensors)} {role} for {count} parameters")
    scale, skip = _scale_and_skip(kwargs, op)
    lr = _learning_rate(kwargs)
    beta1, beta2 = float(kwargs["beta1"]), float(kwargs["beta2"])
    weight_decay, eps = float(kwargs["weight_decay"]), float(kwargs["eps"])
    for i, param in enumerate(params):
        if param.dtype not in ARITHMETIC:
            raise NotEmulated(f"{op}: a parameter of dtype {param.dtype}")
        others = [grads[i], exp_avgs[i], exp_avg_sqs[i]] + ([max_exp_avg_sqs[i]] if amsgrad else [])
        _checked([param] + others, "a tensor", param, op)
    if skip:
        return None
    for i, param in enumerate(params):
        step = float(steps[i].reshape(-1)[0].item())
        _adam_tensor(machine, param, grads[i], exp_avgs[i], exp_avg_sqs[i], max_exp_avg_sqs[i] if amsgrad else None,
                     step, lr, beta1, beta2, weight_decay, eps, adamw, maximize, scale)
    return None


def _adam_tensor(machine, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, weight_decay,
                 eps, adamw, maximize, scale):
    bias_correction1 = 1 - beta1 ** step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
    v = _vector_count(param)
    p, g = _widened(machine, param), _widened(machine, grad)
    m, s = _widened(machine, exp_avg), _widened(machine, exp_avg_sq)
    g = _unscaled(machine, grad, g, scale)
    if maximize:
        g = _negated(machine, g, v)
    if weight_decay != 0:
        if adamw:
            p = np.asarray(machine.mul(p, constant32(1 - lr * weight_decay)))
        else:
            g = np.asarray(machine.fma(p, constant32(weight_decay), g))
    # exp_avg.lerp_(grad, 1 - beta1): one fma from the nearer end
    weight = constant32(1 - beta1)
    difference = np.asarray(machine.sub(g, m))
    if abs(float(np.uint32(weight).view(np.float32))) < 0.5:
        m = np.asarray(machine.fma(weight, difference, m))
    else:
        m = np.asarray(machine.fma(machine.sub(weight, constant32(1)), difference, g))
    c2 = constant32(1 - beta2)
    scaled = np.asarray(machine.mul(c2, g))
    # v * beta2 + (c2 * g) * g: GCC fuses the vector loop's second product, the scalar loop's first
    vector = machine.fma(scaled, g, machine.mul(s, constant32(beta2)))
    s = _joined(vector, machine.fma(s, constant32(beta2), machine.mul(scaled, g)), v)
    _store(machine, exp_avg, m)
    _store(machine, exp_avg_sq, s)
    root_of = s
    if max_exp_avg_sq is not None:
        root_of = _maximum(machine, _widened(machine, max_exp_avg_sq), s, v)
        _store(machine, max_exp_avg_sq, root_of)
    denominator = machine.add(machine.div(machine.sqrt(root_of), constant32(bias_correction2_sqrt)), constant32(eps))
    vector = machine.add(p, machine.div(machine.mul(constant32(-step_size), m), denominator))
    tail = machine.sub(p, machine.div(machine.mul(constant32(step_size), m), denominator))
    _store(machine, param, _joined(vector, tail, v))


def _maximum(machine: Machine, a32: np.ndarray, b32: np.ndarray, v: int) -> np.ndarray:
    """``max(vmax, v)`` of FP32 patterns as torch's two loops take it: the vectorised ``maximum``
    (the second operand unless the first is greater; NaN where either is, the machine's NaN) and
    the scalar loop's ``std::max`` (``a < b ? b : a``: a NaN ``b`` keeps ``a``)."""
    a, b = a32.view(np.float32), b32.view(np.float32)
    nan = np.asarray(machine.propagate_nan(FP32, a32, b32))
    vector = np.where(np.isnan(a) | np.isnan(b), nan, np.where(a > b, a32, b32))
    return _joined(vector, np.where(a < b, b32, a32), v).astype(np.uint32)


@implements("_fused_sgd_", inplace=False)
def fused_sgd(machine, func, args, kwargs):
    """``_fused_sgd_`` (``SGD(fused=True)``), FP32 parameters: per element ``g = grad / grad_scale``;
    ``-g`` if maximize; ``g = fma(p, wd, g)``; momentum ``buf = g`` (first step) or ``fma(1 - dampening,
    g, buf * momentum)``; ``g = fma(buf, momentum, g)`` (nesterov) or ``buf``; ``p = fma(g, -lr, p)``."""
    op = func.overloadpacket.__name__
    params = list(aten_arg(args, kwargs, 0, "self", ()))
    grads = list(aten_arg(args, kwargs, 1, "grads", ()))
    buffers = list(aten_arg(args, kwargs, 2, "momentum_buffer_list", ()))
    momentum = float(kwargs["momentum"])
    weight_decay, dampening = float(kwargs["weight_decay"]), float(kwargs["dampening"])
    nesterov, maximize, first = bool(kwargs["nesterov"]), bool(kwargs["maximize"]), bool(kwargs["is_first_step"])
    if len(grads) != len(params) or (momentum != 0 and len(buffers) != len(params)) or (momentum == 0 and buffers):
        raise RuntimeError(f"{op}: {len(params)} parameters, {len(grads)} grads, {len(buffers)} momentum buffers "
                           "(one buffer per parameter with momentum, none without)")
    scale, skip = _scale_and_skip(kwargs, op)
    lr = _learning_rate(kwargs)
    for i, param in enumerate(params):
        if param.dtype != torch.float32:
            # torch 2.13's 16-bit kernel leaves the parameters of its vectorised loop unchanged and reads
            # the 16-bit momentum buffer as float32 values (measured): no arithmetic to model.
            raise NotEmulated(f"{op}: a {param.dtype} parameter (torch's 16-bit fused SGD kernel is not modelled: "
                              "it does not update the parameters of its vectorised loop)")
        _checked([param, grads[i]] + ([buffers[i]] if momentum != 0 else []), "a tensor", param, op)
    if skip:
        return None
    for i, param in enumerate(params):
        buffer = buffers[i] if momentum != 0 else None
        _sgd_tensor(machine, param, grads[i], buffer, weight_decay, momentum, lr, dampening, nesterov, maximize,
                    first, scale)
    return None


def _sgd_tensor(machine, param, grad, buffer, weight_decay, momentum, lr, dampening, nesterov, maximize, first,
                scale):
    v = _vector_count(param)
    p, g = _widened(machine, param), _widened(machine, grad)
    g = _unscaled(machine, grad, g, scale)
    if maximize:
        g = _negated(machine, g, v)
    if weight_decay != 0:
        g = np.asarray(machine.fma(p, constant32(weight_decay), g))
    if buffer is not None:
        mom = constant32(momentum)
        if first:
            b = g
        else:  # buf * momentum + g * (1 - dampening): the vector loop fuses the second product, the scalar the first
            old, keep = _widened(machine, buffer), constant32(1 - dampening)
            b = _joined(machine.fma(keep, g, machine.mul(old, mom)), machine.fma(old, mom, machine.mul(g, keep)), v)
        _store(machine, buffer, b)
        g = np.asarray(machine.fma(b, mom, g)) if nesterov else b
    _store(machine, param, machine.fma(g, constant32(-lr), p))


@implements("_fused_adagrad_", inplace=False)
def fused_adagrad(machine, func, args, kwargs):
    """``_fused_adagrad_`` (``Adagrad(fused=True)``): per element in FP32, ``g = grad / grad_scale``;
    ``-g`` if maximize; ``g = fma(p, wd, g)``; ``sum = fma(g, g, sum)``; ``p = p - (clr * g) /
    (sqrt(sum) + eps)`` with ``clr = lr / (1 + (step - 1) * lr_decay)`` in double. The 16-bit
    vectorised loop rounds ``wd``, ``eps`` and ``clr`` into the parameter's format first."""
    op = func.overloadpacket.__name__
    names = ("self", "grads", "state_sums", "state_steps")
    params, grads, sums, steps = (list(aten_arg(args, kwargs, i, name, ())) for i, name in enumerate(names))
    for role, tensors in (("grads", grads), ("state_sums", sums), ("state_steps", steps)):
        if len(tensors) != len(params):
            raise RuntimeError(f"{op}: {len(tensors)} {role} for {len(params)} parameters")
    scale, skip = _scale_and_skip(kwargs, op)
    lr, lr_decay = _learning_rate(kwargs), float(kwargs["lr_decay"])
    weight_decay, eps, maximize = float(kwargs["weight_decay"]), float(kwargs["eps"]), bool(kwargs["maximize"])
    for i, param in enumerate(params):
        if param.dtype not in ARITHMETIC:
            raise NotEmulated(f"{op}: a parameter of dtype {param.dtype}")
        _checked([param, grads[i], sums[i]], "a tensor", param, op)
    if skip:
        return None
    for i, param in enumerate(params):
        step = float(steps[i].reshape(-1)[0].item())
        clr = lr / (1.0 + (step - 1.0) * lr_decay)
        _adagrad_tensor(machine, param, grads[i], sums[i], clr, weight_decay, eps, maximize, scale)
    return None


def _adagrad_tensor(machine, param, grad, state_sum, clr, weight_decay, eps, maximize, scale):
    v = _vector_count(param)
    fmt = DTYPE_FORMATS[param.dtype]

    def constants(value):  # (vectorised loop's, scalar loop's): Vec(scalar_t(x)) rounds into a 16-bit format
        single = constant32(value)
        return np.asarray(machine.widen(scalar_bits(value, fmt), fmt)) if fmt is not FP32 else single, single

    p, g, s = _widened(machine, param), _widened(machine, grad), _widened(machine, state_sum)
    g = _unscaled(machine, grad, g, scale)
    if maximize:
        g = _negated(machine, g, v)
    if weight_decay != 0:
        g = _joined(*(machine.fma(p, c, g) for c in constants(weight_decay)), v)
    s = np.asarray(machine.fma(g, g, s))
    _store(machine, state_sum, s)
    root = machine.sqrt(s)
    vector, tail = (machine.sub(p, machine.div(machine.mul(c, g), machine.add(root, e)))
                    for c, e in zip(constants(clr), constants(eps)))
    _store(machine, param, _joined(vector, tail, v))
