"""The torch mode's row maxima and minima (softfloat16.torch.reductions.row_extreme, a compiled
selection) against numpy's argmax/argmin over integer keys ordered as the values (-0 below +0), in
every 8- to 32-bit format torch has, NaN rows included (each NaN profile's pattern)."""
import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.torch.machine import Machine
from softfloat16.torch.reductions import row_extreme


def by_numpy(machine, rows, fmt, largest):
    nan = np.asarray(fmt.is_nan(rows))
    p = rows.astype(np.int64)
    key = np.where(p & fmt.sign_mask, -(p & fmt.magnitude_mask) - 1, p & fmt.magnitude_mask) if fmt.signed else p
    key = np.where(nan, np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max, key)
    index = np.arange(rows.shape[0])
    result = rows[index, np.argmax(key, axis=1) if largest else np.argmin(key, axis=1)]
    first = rows[index, np.argmax(nan, axis=1)]
    return np.where(nan.any(axis=1), machine.propagate_nan(fmt, first), result)


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz"])
def test_row_extreme_is_numpys_selection(name):
    fmt = sf.format(name)
    rng = np.random.default_rng(len(name))
    rows = rng.integers(0, 1 << fmt.width, (400, 9), dtype=np.uint64).astype(fmt.dtype)
    rows[::3] &= fmt.dtype(fmt.magnitude_mask)  # fewer NaNs, more positive rows
    rows[5, :] = rows[5, 0]
    rows[6, :] = 0
    rows[6, 3] = fmt.dtype(fmt.sign_mask)  # -0 and +0 (fnuz: the NaN)
    for profile in ("ieee", "riscv", "x86"):
        machine = Machine(nan=profile)
        for largest in (True, False):
            assert np.array_equal(row_extreme(machine, rows, fmt, largest), by_numpy(machine, rows, fmt, largest)), (
                profile, largest)
