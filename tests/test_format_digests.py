"""Today's formats give the same bits and flags as before formats became independent properties:
digests of every operation, every rounding mode and option (tests/data/make_format_digests.py made
tests/data/format_digests.json from the core as it was before that change)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
_spec = importlib.util.spec_from_file_location("make_format_digests", DATA / "make_format_digests.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
EXPECTED = json.loads((DATA / "format_digests.json").read_text())


def test_the_digests_cover_every_format_and_option():
    assert len(EXPECTED) == 1875
    names = {key.split(".")[0].split("->")[0] for key in EXPECTED}
    assert names == set(make.SMALL + make.WIDE) | {"e8m0"}


# The slice the tests compute: every operation in every mode and option, the conversions into
# fp16 and fp32 and from fp16. `python tests/data/make_format_digests.py --check` compares them all.
SLICE = ("fp16", "fp32")


@pytest.mark.parametrize("name", make.ALL)
def test_same_bits_as_before(name):
    computed = make.digests((name,), SLICE)
    assert set(computed) <= set(EXPECTED) and len(computed) >= 2 * len(make.VARIANTS)
    differ = [k for k in computed if computed[k] != EXPECTED[k]]
    assert not differ, f"{len(differ)} of {len(computed)} digests differ: {differ[:10]}"
