"""farmctl and a tune on emulated devices: a mix refused at enqueue, the outcome in one line."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from click.testing import Result
from device_states import put_state

from farm.queue import DeviceState, Outcome, Store
from farm.queue.scheduler import Assignment
from farm.tuning.emulated import emulated_note

NOW = datetime(2025, 1, 1, tzinfo=UTC)
EMULATED = {"kind": "board", "abi": "aarch64", "emulated": True, "num_cores": 2}
REAL = {"kind": "board", "abi": "aarch64", "emulated": False, "num_cores": 2}


class TestEnqueueTuneOnEmulated:
    def test_emulated_and_real_devices_together_are_refused(
        self, farmctl: Callable[..., Result], store: Store,
    ) -> None:
        """--serial naming an emulated board and a real one is a one-line usage error; either
        alone is taken."""
        store.upsert_device("vb0", NOW, EMULATED, kind="board")
        store.upsert_device("b0", NOW, REAL, kind="board")
        mixed = farmctl("enqueue", "tune", "--n", "64", "--kind", "board", "--phones", "2",
                        "--serial", "vb0", "--serial", "b0")
        assert mixed.exit_code == 2, mixed.output
        assert "vb0 emulated and b0 not" in mixed.stderr and "Traceback" not in mixed.output
        assert store.get_job(1) is None
        for serial in ("vb0", "b0"):
            alone = farmctl("enqueue", "tune", "--n", "64", "--kind", "board", "--serial", serial)
            assert alone.exit_code == 0, alone.output


class TestJobOnEmulated:
    def test_job_says_in_one_line_that_nothing_was_ranked(
        self, farmctl: Callable[..., Result], store: Store,
    ) -> None:
        """farmctl job of a tune that ran on an emulated board shows the note as its outcome."""
        store.upsert_device("vb0", NOW, EMULATED, kind="board")
        put_state(store, "vb0", DeviceState.READY, "test", NOW)
        job_id = store.enqueue({"kind": "tune", "devices": {"kind": "board"},
                                "params": {"gemm": {"n": 64}, "trials": 4}}, NOW)
        [claim] = store.claim([Assignment(job_id, ("vb0",), 60.0)], NOW)
        note = emulated_note(["vb0"])
        store.finish(claim.attempt.id, Outcome({
            "kind": "tune", "emulated": True, "outputs_matched": True, "emulated_note": note,
            "speedup": None, "runs": [{"serial": "vb0", "max_abs_err": 0.0, "emulated": True}],
        }), NOW)
        shown = farmctl("job", str(job_id))
        assert shown.exit_code == 0, shown.output
        assert note in shown.stdout
        assert "best build" not in shown.stdout and "speed-up" not in shown.stdout
