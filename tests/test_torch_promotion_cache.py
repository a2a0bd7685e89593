"""operands.elementwise_result remembers torch's answer (result dtype and shape, from a call on meta
tensors) per promotion key: tensor shapes and dtypes, number types, other arguments' values."""
import pytest

torch = pytest.importorskip("torch")

from softfloat16.torch import operands  # noqa: E402

aten = torch.ops.aten
half, flag = torch.ones(2, 3, dtype=torch.float16), torch.ones(2, 3, dtype=torch.bool)
whole = torch.ones(3, dtype=torch.int32)
CALLS = [
    (aten.where.self, (flag, half, torch.ones(3)), {}),           # float16 and float32 branches: float32
    (aten.where.self, (flag, half, half), {}),
    (aten.add.Tensor, (whole, 2), {}),                              # int32
    (aten.add.Tensor, (whole, 2.5), {}),                            # a float scalar: the default float dtype
    (aten.add.Tensor, (whole, True), {}),
    (aten.add.Tensor, (half, torch.ones(2, 1, 1, dtype=torch.float32)), {}),   # broadcast: (2, 2, 3)
    (aten.add.Tensor, (half, torch.tensor(1.0, dtype=torch.float64)), {}),     # a 0-dim tensor: float16
    (aten.div.Tensor_mode, (whole, whole), {"rounding_mode": "floor"}),        # int32
    (aten.div.Tensor_mode, (whole, whole), {"rounding_mode": None}),           # true division: float32
]


@pytest.mark.parametrize("call", range(len(CALLS)))
def test_remembered_results_are_torchs(call, monkeypatch):
    monkeypatch.setattr(operands, "_RESULTS", {})
    func, args, kwargs = CALLS[call]
    want = func(*args, **kwargs)
    for _ in range(2):  # computed, then remembered
        got = operands.elementwise_result(func, args, kwargs)
        assert (got.dtype, tuple(got.shape)) == (want.dtype, tuple(want.shape))


def test_each_key_is_remembered_once_and_distinguishes_number_types(monkeypatch):
    monkeypatch.setattr(operands, "_RESULTS", {})
    for func, args, kwargs in CALLS:
        operands.elementwise_result(func, args, kwargs)
    # Each call leaves the fast path (operands of one floating dtype and numbers): one key each.
    assert len(operands._RESULTS) == len(CALLS)
    dtypes = {operands.elementwise_result(aten.add.Tensor, (whole, x), {}).dtype for x in (2, 2.5, True)}
    assert dtypes == {torch.int32, torch.float32}
