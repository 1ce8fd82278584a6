"""A process holding the queue is killed with SIGKILL: nothing is lost or doubled.

The child process stands in for farmd: it claims a job, then dies by SIGKILL in
the middle of committing the result (after the rows are written, before
COMMIT). The test then does what a restarted farmd does: reap, plan, claim,
finish, and checks the job has exactly one result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta

from device_states import put_state
from queue_helpers import T0, add_ready, gemm_spec, plan

from farm.queue import AttemptState, DeviceState, JobState, Outcome, Store

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from datetime import datetime, timezone
    import farm.composition  # the job kinds the queue reads specs by, as farmd installs them
    farm.composition.install()
    from farm.queue import Store, plan, Outcome
    from farm.queue import lifecycle

    T0 = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
    store = Store(sys.argv[1])
    (claim,) = store.claim(plan(store.snapshot(), T0, lease_s_by_kind={"gemm": 120.0}), T0)
    print("attempt_id", claim.attempt.id, flush=True)
    with store._tx() as session:
        lifecycle.finish(session, claim.attempt.id, Outcome({"median_s": 1.0}, [1.0]), T0)
        session.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


class TestKilledHolder:
    """SIGKILL in the middle of a commit leaves a consistent, recoverable queue."""

    def test_kill_mid_commit_then_recover_with_one_result(self, tmp_path) -> None:
        """The half-written result vanishes; after reap the job runs again and has exactly one
        result."""
        url = f"sqlite:///{tmp_path / 'farm.db'}"
        with Store(url) as store:
            add_ready(store, "a")
            job_id = store.enqueue(gemm_spec(), T0)
        child = subprocess.run(
            [sys.executable, "-c", CHILD, url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert child.returncode == -signal.SIGKILL, child.stderr
        (line,) = [ln for ln in child.stdout.splitlines() if ln.startswith("attempt_id ")]
        attempt_id = int(line.split()[1])

        with Store(url) as store:  # farmd restarts
            assert store.count_results(job_id) == 0
            assert store.get_job(job_id).state is JobState.RUNNING
            later = T0 + timedelta(seconds=121)
            (reaped,) = store.reap(later)
            assert reaped.id == attempt_id and reaped.state is AttemptState.ABANDONED
            put_state(store, "a", DeviceState.READY, "health check passed", later)
            (claim,) = store.claim(plan(store.snapshot(), later), later)
            assert store.finish(claim.attempt.id, Outcome({"median_s": 1.0}, [1.0]), later)
            assert store.count_results(job_id) == 1
            assert store.get_job(job_id).state is JobState.SUCCEEDED
