"""torch's ``_foreach_*`` ops (the multi-tensor forms torch.optim uses with ``foreach=True``).

On the CPU torch runs every foreach op as a loop of the single-tensor op over the list elements
(its "slow path"); the mode does the same, generically: ``_foreach_<op>[_].<overload>`` takes
element ``i`` of every list argument (``Tensor[]``, ``Scalar[]``, and the ``scalars`` tensor of
``addcmul``/``addcdiv``), passes the other arguments unchanged, and calls the mode's
implementation of ``aten.<op>`` with the overload torch would pick for those arguments. So
``torch.optim.Adam(foreach=True)`` computes the same bits as ``foreach=False``. The in-place forms
compute every element first and then write the results into ``self`` (rounded into its dtype),
so a list with an element the mode does not emulate is left untouched.

>>> import torch, softfloat16.torch as sft
>>> params = [torch.ones(2, dtype=torch.bfloat16), torch.full((1,), 3.0, dtype=torch.bfloat16)]
>>> with sft.emulate():
...     _ = torch._foreach_addcmul_(params, params, params, 1 / 3)   # p + p * p / 3
>>> [p.tolist() for p in params]
[[1.3359375, 1.3359375], [6.0]]
"""
from __future__ import annotations

import functools

import torch

from .registry import IMPLEMENTATIONS, NATIVE, NotEmulated, aten, implements
from .tensors import is_emulated

__all__ = ["FOREACH_OPS", "foreach"]

#: The foreach ops of torch 2.13 (each also has an in-place ``name_`` form where torch has one).
FOREACH_OPS = """
abs acos add addcdiv addcmul asin atan ceil clamp_max clamp_min clone copy_ cos cosh div erf erfc exp expm1
floor frac lerp lgamma log log10 log1p log2 max maximum minimum mm mul neg norm pow reciprocal round rsqrt
sigmoid sign sin sinh sqrt sub tan tanh trunc zero_
""".split()

_PREFIX = "_foreach_"


def _target(base: str, overload: str) -> str:
    """The single-tensor aten op computing one element of ``_foreach_<base>.<overload>``."""
    if base in ("maximum", "minimum") and overload in ("Scalar", "ScalarList"):
        return "clamp_min" if base == "maximum" else "clamp_max"  # torch's own choice
    return "linalg_vector_norm" if base == "norm" else base


def _bind(func, args: tuple, kwargs: dict) -> list[tuple[str, object, bool]]:
    """(name, value, is a per-element list) for every argument given, in schema order."""
    bound = []
    for index, argument in enumerate(func._schema.arguments):
        if index < len(args):
            value = args[index]
        elif argument.name in kwargs:
            value = kwargs[argument.name]
        else:
            continue
        listed = isinstance(value, (list, tuple))
        if argument.name == "scalars" and isinstance(value, torch.Tensor):  # addcmul/addcdiv .Tensor
            value, listed = value.tolist(), True
        bound.append((argument.name, value, listed))
    return bound


def _element_call(target: str, bound, i: int) -> tuple[tuple, dict]:
    """Positional and keyword arguments of the single-tensor op for element ``i``."""
    values = [(name, value[i] if listed else value) for name, value, listed in bound]
    if target in ("addcmul", "addcdiv"):  # value is keyword-only in the single-tensor op
        positional = tuple(v for name, v in values if name not in ("value", "scalars"))
        scale = [v for name, v in values if name in ("value", "scalars")]
        return positional, ({"value": scale[0]} if scale else {})
    if target == "linalg_vector_norm":  # (self, ord, dtype) -> (self, ord, dim=None, keepdim=False, dtype=)
        named = dict(values)
        return (named["self"], named.get("ord", 2)), {"dtype": named.get("dtype")}
    keyword_only = _keyword_only(target)
    positional = tuple(v for name, v in values if name not in keyword_only)
    return positional, {name: v for name, v in values if name in keyword_only}


@functools.cache
def _keyword_only(target: str) -> frozenset[str]:
    """Names of the keyword-only arguments of any overload of ``aten.<target>`` (``alpha``...)."""
    packet = getattr(aten, target)
    return frozenset(argument.name for overload in packet.overloads()
                     for argument in getattr(packet, overload)._schema.arguments if argument.kwarg_only)


def _converted(machine, target: torch.Tensor, result: torch.Tensor, func) -> torch.Tensor:
    """``result`` ready to be copied into ``target``: rounded into its dtype by the machine, its shape
    checked (an in-place op cannot broadcast ``self``, as torch says)."""
    if result.shape != target.shape:
        raise RuntimeError(f"{func}: output with shape {list(target.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)}")
    if result.dtype != target.dtype:
        if not is_emulated(target.dtype):
            raise NotEmulated(f"{func}: a result of {result.dtype} written into {target.dtype}")
        result = machine.convert(result, target.dtype)
    return result


@implements(*(_PREFIX + name for name in FOREACH_OPS), *(_PREFIX + name + "_" for name in FOREACH_OPS if
                                                         not name.endswith("_")), inplace=False)
def foreach(machine, func, args, kwargs):
    """``_foreach_<op>``: the single-tensor op on each element of the lists (see the module doc);
    the in-place forms write their results into ``self`` and return None."""
    name = func.overloadpacket.__name__[len(_PREFIX):]
    in_place = name.endswith("_")
    base = name[:-1] if in_place else name
    target = _target(base, func._overloadname)
    packet = getattr(aten, target, None)
    if packet in NATIVE:  # zero_, clone: nothing rounded
        return func(*args, **kwargs)
    implementation = IMPLEMENTATIONS.get(packet)
    if implementation is None:
        raise NotEmulated(f"{func}: its single-tensor op aten.{target} is not emulated")
    bound = _bind(func, args, kwargs)
    lengths = {len(value) for _, value, listed in bound if listed}
    if len(lengths) > 1:
        raise RuntimeError(f"{func}: the list arguments have different lengths {sorted(lengths)}")
    count = lengths.pop() if lengths else 0
    results = []
    for i in range(count):
        element_args, element_kwargs = _element_call(target, bound, i)
        try:  # the overload torch's own dispatch picks for these arguments (as torch.ops.aten.<op>(...) does)
            overload = torch._C._jit_resolve_packet(f"aten::{target}", *element_args, **element_kwargs)
        except RuntimeError as error:
            raise NotEmulated(f"{func}: no aten.{target} overload for element {i} ({error})") from None
        results.append(implementation(machine, getattr(packet, overload), element_args, element_kwargs))
    if not in_place:
        return results
    targets = bound[0][1]
    ready = [_converted(machine, target_tensor, result, func) for target_tensor, result in zip(targets, results)]
    for target_tensor, result in zip(targets, ready):
        target_tensor.copy_(result)
    return None
