"""A model job enqueued on one host runs on another that shares only the database.

Host A (its own data folder) enqueues the small CNN as ``farmctl enqueue model``
does; the user's file is then deleted. Host B (another data folder, no model
file on its disk) claims the job and runs its attempt through the kind's runner
against a real TVM tracker and RPC server on loopback: the model comes from the
database's blob into B's cache. The thermal gate is a fixed snapshot (no adb).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from device_states import put_state

from farm.config import Settings
from farm.jobs.local_cluster import LocalCluster
from farm.jobs.model_store import MODELS_DIR, store_spec_models
from farm.kinds import kind_of
from farm.kinds.run import RunContext, execute
from farm.queue import DeviceState, Store
from farm.queue.records import SnapshotData
from farm.queue.scheduler import Assignment
from farm.queue.spec import parse_spec
from farm.tvm.keys import phone_key

NOW = datetime(2025, 1, 1, tzinfo=UTC)
SERIAL = "R1"
HOST_B_KEY = "host-b"


class TestModelAcrossHosts:
    def test_job_enqueued_on_a_runs_on_b_from_the_blob(
        self, cluster: LocalCluster, small_cnn: Path, tmp_path: Path
    ) -> None:
        """B has no model file beforehand; its attempt materialises the blob and times it."""
        url = f"sqlite:///{tmp_path / 'shared' / 'farm.db'}"
        host_a, host_b = tmp_path / "a", tmp_path / "b"
        digest = hashlib.sha256(small_cnn.read_bytes()).hexdigest()
        with Store(url) as store_a:  # host A: farmctl enqueue model --model small_cnn.onnx
            raw = {"kind": "model", "params": {"path": str(small_cnn), "number": 1, "repeat": 1},
                   "repetitions": 1}
            spec = parse_spec(store_spec_models(raw, kind_of("model").input_files, store_a, NOW))
            job_id = store_a.enqueue(spec, NOW)
        small_cnn.unlink()
        assert not (host_a / MODELS_DIR).exists() and not host_b.exists()

        cluster.add_servers(phone_key(HOST_B_KEY, SERIAL))
        settings_b = Settings(data_dir=host_b, database_url=url,
                              tracker={"host": cluster.host, "port": cluster.port,
                                       "key": HOST_B_KEY})
        with Store(settings_b.database_url) as store_b:  # host B: claim and run the attempt
            # A host rpc_server stands in for the phone: say so (farm.jobs.targets).
            facts = {"abi": "x86_64", "host_runtime": True, "num_cores": 2}
            store_b.upsert_device(SERIAL, NOW, facts)
            put_state(store_b, SERIAL, DeviceState.READY, "test", NOW)
            [claim] = store_b.claim([Assignment(job_id, (SERIAL,), 600.0)], NOW)
            job = store_b.get_job(job_id)
            assert job is not None and job.spec["params"]["sha256"] == digest
            ctx = RunContext(settings_b, job, claim.attempt, {SERIAL: facts},
                             lambda serial: SnapshotData(serial, NOW), store_b)
            outcome = execute(ctx)
            assert store_b.finish(claim.attempt.id, outcome, NOW)
            assert len(store_b.results(job_id)) == 1
        cached = host_b / MODELS_DIR / f"{digest}.onnx"
        assert hashlib.sha256(cached.read_bytes()).hexdigest() == digest
        assert outcome.summary["model"] == "small_cnn.onnx"
        assert outcome.samples and all(s > 0 for s in outcome.samples)
        assert set(outcome.sample_serials) == {SERIAL}
