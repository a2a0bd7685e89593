"""Replay torch-on-CUDA dumps kept under tests/data/cuda/ (made by bench/gpu_check.sh on a GPU).

No GPU and no torch are needed to replay a dump: each op's recorded inputs are fed to the
emulator. Exact-mode dumps must be bit-identical; library-mode dumps may diverge only in ops a
library kernel computed. Without fixtures (no GPU run has been kept yet) the tests skip.
"""
import pathlib

import pytest

from sim.crosscheck.compare import compare_records, format_report
from sim.crosscheck.dump import load_dump
from sim.crosscheck.program import Plan, record_trainer
from sim.crosscheck.record import EmulatorBackend, replay
from sim.train import TrainConfig

FIXTURES = sorted((pathlib.Path(__file__).parents[2] / "data" / "cuda").glob("*.npz"))


@pytest.mark.skipif(not FIXTURES, reason="no CUDA dumps under tests/data/cuda/ (run bench/gpu_check.sh on a GPU)")
@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])  # pytest 7 calls an id function on []
def test_cuda_dump_replays_on_the_emulator(path):
    dump = load_dump(path)
    plan = Plan.from_config(TrainConfig.from_dict(dump.config), dump.steps)
    exact = dump.mode == "exact"
    backend = EmulatorBackend(None if exact else "h100")
    replayed = replay(dump.records, backend, lambda r: plan.source(r.name, r.step))
    report = compare_records(dump.records, replayed, replay=True)
    if exact:
        assert report.bit_identical, format_report(report)
        cascade = compare_records(dump.records, record_trainer(plan))
        assert cascade.bit_identical, format_report(cascade)
    else:
        assert not report.unexpected, format_report(report)
