"""Which aten ops the mode computes, and which it lets torch run.

``IMPLEMENTATIONS`` maps an aten overload packet (``torch.ops.aten.add``: every overload of
``add``) to a function ``(machine, func, args, kwargs) -> result`` that computes it on the
emulator. ``NATIVE`` lists the packets that only move, select or create data without rounding
anything (views, copies, indexing, concatenation, random number generation...): torch runs them.
An op in neither is not emulated: an error under ``strict=True``, a counted native fallback
otherwise.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .tensors import is_emulated

__all__ = ["IMPLEMENTATIONS", "NATIVE", "EmulationError", "NotEmulated", "NotEmulatedError", "aten_arg", "emulation",
           "implements"]

aten = torch.ops.aten
Implementation = Callable[..., Any]
IMPLEMENTATIONS: dict[Any, Implementation] = {}


class EmulationError(RuntimeError):
    """An op the mode cannot run as asked (a tensor on a device other than the CPU)."""


class NotEmulatedError(EmulationError):
    """``strict=True`` and an op with emulated-dtype tensors that the mode does not implement."""


# Set by mode.py: the emulation mode class, for implementations that decompose an op into aten ops
# and run them under the mode again (registry.py cannot import mode.py, which imports every op).
_MODE: Any = None


def emulation(machine):
    """A strict emulation mode with ``machine``, for an implementation that computes its op as a
    sequence of aten ops (``_transformer_encoder_layer_fwd``): entered inside ``__torch_dispatch__``,
    it emulates those ops as the outer mode would."""
    return _MODE(machine, strict=True)


class NotEmulated(Exception):
    """Raised by an implementation for arguments it does not cover (``div`` with
    ``rounding_mode="floor"``, say): the mode then treats the call as an op it does not know."""


def _packet(name: str):
    return getattr(aten, name, None)


def implements(*names: str, inplace: bool = True) -> Callable[[Implementation], Implementation]:
    """Register a function for the aten ops ``names`` (and, with ``inplace``, their ``name_``
    in-place forms, which compute the functional op and copy the result into ``self``). An op
    has one implementation: registering a second one raises ``RuntimeError`` naming both."""

    def register(function: Implementation) -> Implementation:
        entries = []
        for name in names:
            packet = _packet(name)
            if packet is not None:
                entries.append((packet, function))
            in_place = _packet(name + "_") if inplace else None
            if in_place is not None:
                entries.append((in_place, _in_place(name, function)))
        for index, (packet, _) in enumerate(entries):
            earlier = IMPLEMENTATIONS.get(packet) or next((f for p, f in entries[:index] if p is packet), None)
            if earlier is not None:
                raise RuntimeError(
                    f"aten.{packet.__name__} is implemented twice: by {_where(earlier)} and by {_where(function)}; "
                    "an op has one implementation (remove one registration)")
        IMPLEMENTATIONS.update(entries)
        return function

    return register


def _where(implementation: Implementation) -> str:
    """module.function of an implementation (the functional op's, for an in-place wrapper)."""
    function = getattr(implementation, "__wrapped__", implementation)
    return f"{function.__module__}.{function.__qualname__}"


def _in_place(name: str, function: Implementation) -> Implementation:
    def compute_in_place(machine, func, args, kwargs):
        functional = getattr(_packet(name), func._overloadname, None)
        if functional is None:
            raise NotEmulated(f"no functional form of {func}")
        # The functional op computes in the promoted dtype (x_half.add_(y_float) adds in FP32);
        # the result is then rounded into self's dtype, as TensorIterator's output cast does.
        result = function(machine, functional, args, kwargs)
        target = args[0]
        if result.dtype != target.dtype:
            if not is_emulated(target.dtype):
                raise NotEmulated(f"{func}: a result of {result.dtype} written into {target.dtype}")
            result = machine.convert(result, target.dtype)
        target.copy_(result)
        return target

    compute_in_place.__name__ = f"{function.__name__}_in_place"
    compute_in_place.__wrapped__ = function
    return compute_in_place


def aten_arg(args: tuple, kwargs: dict, index: int, name: str, default=None):
    """Argument ``index`` (positional) or ``name`` (keyword) of an aten call."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


# Ops that round nothing: views and reshapes, copies within a dtype, indexing and selection,
# concatenation, creation of exact values (zeros, ones, empty), random number generators, and
# exact predicates. Torch runs them on the same bits the emulator would produce.
_NATIVE_NAMES = """
view _unsafe_view reshape _reshape_alias view_as t transpose permute expand squeeze unsqueeze slice select
narrow as_strided alias detach clone unfold diagonal unflatten split split_with_sizes chunk unbind
unsafe_split unsafe_split_with_sizes unsafe_chunk _pack_padded_sequence
tensor_split cat stack index index_select gather take flip roll repeat masked_select nonzero
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like new_zeros
new_ones zero lift_fresh lift_fresh_copy _local_scalar_dense set resize resize_as
rand randn randint randperm rand_like randn_like randint_like uniform normal bernoulli random exponential
isnan isinf isfinite isneginf isposinf signbit sort argsort topk argmax argmin equal
embedding select_backward slice_backward triu tril
is_same_size _unsafe_view_copy view_copy expand_copy permute_copy t_copy transpose_copy squeeze_copy
unsqueeze_copy select_copy slice_copy detach_copy alias_copy
""".split()
NATIVE = frozenset(p for p in (_packet(n) for n in _NATIVE_NAMES) if p is not None) | frozenset(
    p for p in (_packet(n + "_") for n in ("set", "resize", "resize_as", "zero", "uniform", "normal", "bernoulli",
                                           "random", "exponential", "detach", "squeeze", "unsqueeze", "t",
                                           "transpose", "as_strided")) if p is not None)
