"""verify on a Dask cluster (``--scheduler``): a LocalCluster gives the Summary of a local run,
continues a local run's checkpoint, runs ``--table``; a scheduler that cannot be reached, or no
distributed installed, is one line on stderr and exit status 2. The cluster tests are skipped
where distributed (the ``dask`` extra) is not installed."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

import softfloat16 as sf
from softfloat16 import verify as verify_module
from softfloat16.__main__ import main
from softfloat16.verify import CHUNK, SchedulerError, verify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(sf.__file__)))
# three chunks, the last one short: enough for the chunks to finish out of order on two workers
SAMPLE = 2 * CHUNK + 5000


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes of one thread each (about 3 s to start on 2 cores)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as local_cluster:
        yield local_cluster.scheduler_address


@pytest.fixture(scope="module")
def local():
    """The local run the cluster's runs must equal."""
    return verify("fp16", "add", "rtz", sample=SAMPLE, workers=1)


def _same(a, b) -> None:
    assert (a.job, a.cases, a.mismatches, a.settled, a.examples, a.chunks_done, a.complete) == \
           (b.job, b.cases, b.mismatches, b.settled, b.examples, b.chunks_done, b.complete)


def _closed_port() -> int:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_cluster_gives_the_summary_of_a_local_run(cluster, local):
    remote = verify("fp16", "add", "rtz", sample=SAMPLE, scheduler=cluster)
    _same(remote, local)
    assert remote.job.chunks == 3 and remote.workers == 2 and remote.scheduler == cluster
    assert f"(2 Dask worker threads at {cluster})" in verify_module.format_summary(remote)


def test_a_cluster_continues_the_checkpoint_of_a_local_run(cluster, local, monkeypatch, tmp_path):
    checkpoint = str(tmp_path / "run.json")
    real_check = verify_module.check_chunk

    def interrupted(job, chunk):
        if chunk == 2:
            raise KeyboardInterrupt
        return real_check(job, chunk)
    monkeypatch.setattr(verify_module, "check_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        verify("fp16", "add", "rtz", sample=SAMPLE, workers=1, checkpoint=checkpoint)
    monkeypatch.setattr(verify_module, "check_chunk", real_check)
    with open(checkpoint) as f:
        assert sorted(json.load(f)["chunks"]) == ["0", "1"]

    resumed = verify("fp16", "add", "rtz", sample=SAMPLE, scheduler=cluster, checkpoint=checkpoint)
    assert resumed.chunks_resumed == 2 and resumed.complete
    with open(checkpoint) as f:
        assert sorted(json.load(f)["chunks"]) == ["0", "1", "2"]
    _same(resumed, local)


def test_mismatches_come_back_in_case_order_whatever_order_chunks_finish(monkeypatch):
    """Two in-process workers (they see the error injected here); many small chunks."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(verify_module, "CHUNK", 1 << 12)
    monkeypatch.setattr(verify_module, "BLOCK", 1 << 10)
    original = sf.Format.sub

    def corrupted(self, a, b, **options):
        result = original(self, a, b, **options).copy()
        result[(a & 0x3FF) == 7] ^= 1
        return result
    monkeypatch.setattr(sf.Format, "sub", corrupted)
    local = verify("fp16", "sub", "rdn", sample=12 << 12, workers=1)
    assert local.job.chunks == 12 and local.mismatches > 10
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as in_process, \
            distributed.Client(in_process, set_as_default=False) as client:
        remote = verify("fp16", "sub", "rdn", sample=12 << 12, scheduler=client)  # a Client works too
        assert client.status == "running"  # the caller's client stays open
    _same(remote, local)
    assert [x["case"] for x in remote.examples] == sorted(x["case"] for x in remote.examples)


def test_table_runs_on_the_cluster_and_resumes(cluster, tmp_path, capsys):
    folder = str(tmp_path / "table")
    argv = ["verify", "--table", "--only", "fp4_e2m1,add", "--sample", "500", "--scheduler", cluster,
            "--checkpoint", folder]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("verify --table: 2 rows, 18 jobs\n")
    assert "  add fp4_e2m1 (14 jobs): 7000 cases, 0 mismatches" in out
    assert f"(2 Dask worker threads at {cluster})" in out and len(os.listdir(folder)) == 18
    assert main(argv) == 0
    assert "chunks resumed from a checkpoint: 18" in capsys.readouterr().out


def test_an_unreachable_scheduler_is_one_line_and_status_2():
    pytest.importorskip("distributed")
    address = f"tcp://127.0.0.1:{_closed_port()}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "softfloat16", "verify", "--format", "fp16", "--op", "add",
                           "--sample", "100", "--scheduler", address], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"python -m softfloat16 verify: error: cannot reach the Dask scheduler at {address}")


@pytest.mark.parametrize("address", ["not-an-address", "foo://host:1", "tcp://no-such-host.invalid:8786"])
def test_bad_addresses_are_one_line_too(address, capsys):
    pytest.importorskip("distributed")
    assert main(["verify", "--table", "--only", "fp4_e2m1,sqrt,rtz", "--scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot reach the Dask scheduler at {address} (" in err


def test_without_distributed_the_error_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(SchedulerError, match=r'pip install -e "\.\[dask\]"'):
        verify("fp16", "add", sample=10, scheduler="tcp://127.0.0.1:8786")
    assert main(["verify", "--format", "fp16", "--op", "add", "--sample", "10", "--scheduler", "tcp://x:1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'the optional extra dask: pip install -e ".[dask]"' in err
