"""farmd on virtual phones, event-driven: an enqueue starts a job at once; a hand session waits;
a killed tracker costs a queued job no try.

The dispatcher's periodic tick is set to 60 s in these tests, so a job that
starts within seconds was started by a wake, not by the tick.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from farm.cli.main import cli
from farm.clock import wait_until
from farm.config import Settings
from farm.daemon import Farmd
from farm.queue.models import AttemptState, DeviceState, JobState
from farm.queue.waiting import wait_reasons
from farm.virtual.android.spec import profiles
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet

LONG_TICK_S = 60.0
#: Well under the 60 s tick: enough for a claim on a loaded 2-core host.
STARTED_WITHIN_S = 15.0
READY_DEADLINE_S = 150.0
JOB_DEADLINE_S = 240.0
TINY_GEMM = ["--n", "16", "--number", "1", "--samples", "3"]
#: Under the default 30 s sweep: only the held watch can see a hand session this soon.
HELD_WITHIN_S = 20.0

HAND_SCRIPT = textwrap.dedent("""
    import sys
    from tvm import rpc
    session = rpc.connect_tracker(sys.argv[1], int(sys.argv[2])).request(sys.argv[3])
    print("held", flush=True)
    sys.stdin.read()  # hold the phone until the test closes stdin
""")


@pytest.fixture
def event_farmd(
    adb_server: AdbServerHandle, tmp_path: Path, hermetic_settings: Callable[..., Settings]
) -> Iterator[Callable[..., Farmd]]:
    """Factory: ``event_farmd(health_interval_s=30)`` -> a farmd with one ready usb-only phone."""
    with contextlib.ExitStack() as stack:
        def start(health_interval_s: float = 30.0) -> Farmd:
            fleet = stack.enter_context(Fleet(1, specs=profiles(1, "usb-only"),
                                              adb_port=adb_server.port,
                                              data_dir=tmp_path / "phones"))
            settings = hermetic_settings(health={"interval_s": health_interval_s},
                                         jobs={"tick_interval_s": LONG_TICK_S})
            farmd = Farmd(settings)
            stack.callback(farmd.stop)
            farmd.start()
            serial = fleet.serials[0]

            def ready() -> bool:
                record = farmd.store.get_device(serial)
                return record is not None and record.state is DeviceState.READY

            wait_until(ready, READY_DEADLINE_S, "the phone ready")
            return farmd

        yield start


def farmctl(farmd: Farmd, *args: str) -> str:
    """Run ``farmctl`` on farmd's data folder and queue; returns its output."""
    config = farmd.data_dir.parent / "farmctl.toml"
    config.write_text(f'data_dir = "{farmd.data_dir}"\n'
                      f'database_url = "{farmd.settings.database_url}"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == 0, result.output
    return result.output


def job_id_of(output: str) -> int:
    """The id in ``job N queued (kind)`` (farmd's threads may log into the same output)."""
    found = re.search(r"^job (\d+) queued", output, re.MULTILINE)
    assert found is not None, output
    return int(found.group(1))


def started_after_s(farmd: Farmd, job_id: int) -> float | None:
    """Seconds from the job's submission to its first attempt's start, or None."""
    attempts = farmd.store.attempts(job_id)
    job = farmd.store.get_job(job_id)
    if not attempts or job is None:
        return None
    return (attempts[0].started_at - job.submitted_at).total_seconds()


def wait_finished(farmd: Farmd, job_id: int) -> Any:
    """Wait for the job to end; return its view."""
    return wait_until(lambda: (j := farmd.store.get_job(job_id)) is not None and j.state.ended
                      and j, JOB_DEADLINE_S, f"job {job_id} finished")


class TestDispatchOnEnqueue:
    def test_farmctl_enqueue_starts_the_job_long_before_the_tick(
        self, event_farmd: Callable[..., Farmd]
    ) -> None:
        """With a 60 s tick, a job farmctl queues starts within seconds (the wake)."""
        farmd = event_farmd()
        job_id = job_id_of(farmctl(farmd, "enqueue", "gemm", *TINY_GEMM))
        waited = wait_until(lambda: started_after_s(farmd, job_id), STARTED_WITHIN_S)
        assert waited is not None, f"job {job_id} did not start within {STARTED_WITHIN_S} s"
        assert waited < STARTED_WITHIN_S
        job = wait_finished(farmd, job_id)
        assert job.state is JobState.SUCCEEDED
        # The phone freed by the child's exit takes the next job at once too.
        second = job_id_of(farmctl(farmd, "enqueue", "gemm", *TINY_GEMM))
        assert wait_until(lambda: started_after_s(farmd, second), STARTED_WITHIN_S) is not None
        assert wait_finished(farmd, second).state is JobState.SUCCEEDED


class TestHandSession:
    def test_job_waits_for_a_hand_session_then_runs(
        self, event_farmd: Callable[..., Farmd]
    ) -> None:
        """A person's own session holds the phone: shown held outside, the job waits, then runs.

        At the default 30 s health sweep: the held watch (``health.held_interval_s``)
        sees the session long before a sweep could (the sweep needs two sightings,
        30 s apart), so a job queued meanwhile is not sent onto the phone (issue 26).
        """
        farmd = event_farmd()
        assert farmd.settings.health.interval_s == Settings().health.interval_s
        assert farmd.settings.health.held_interval_s == Settings().health.held_interval_s
        serial = farmd.store.list_devices()[0].serial
        key = farmd.manager.runtime(serial).key
        host, port = farmd.tracker_addr
        hand = subprocess.Popen(
            [sys.executable, "-c", HAND_SCRIPT, host, str(port), key],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        try:
            assert hand.stdout is not None and hand.stdout.readline().strip() == b"held"

            def held() -> str | None:
                record = farmd.store.get_device(serial)
                return None if record is None else record.held_outside

            reason = wait_until(held, HELD_WITHIN_S, "the phone shown held outside farm")
            assert reason is not None
            assert reason.startswith("held outside farm by a session from 127.0.0.1:")
            shown = farmctl(farmd, "devices", "--json")
            assert "ready (held outside)" in shown and reason in shown

            job_id = job_id_of(farmctl(farmd, "enqueue", "gemm", *TINY_GEMM))
            reasons = wait_reasons(farmd.store.snapshot(), datetime.now(UTC))
            assert reasons[job_id] == f"the only match is {reason}"
            # A sweep later it still waits: no attempt burnt, the phone still healthy.
            # The sweep the 30 s health interval runs, run now rather than waited for.
            farmd.manager.sweep()
            assert farmd.store.attempts(job_id) == []
            record = farmd.store.get_device(serial)
            assert record is not None and record.state is DeviceState.READY
        finally:
            hand.communicate(timeout=60)  # closes stdin: the session ends
        wait_until(lambda: farmd.store.get_device(serial).held_outside is None,  # type: ignore[union-attr]
                   HELD_WITHIN_S, "the hold cleared")
        job = wait_finished(farmd, job_id)
        assert job.state is JobState.SUCCEEDED
        assert len(farmd.store.attempts(job_id)) == 1


class TestTrackerOutage:
    def test_a_killed_tracker_costs_a_queued_job_no_try(
        self, event_farmd: Callable[..., Farmd]
    ) -> None:
        """The tracker dies with the phone ready and a one-try job queued: farmd restarts it,
        its fleet serves the app again (once: reconcile is the one owner of that restart),
        claims nothing until the new tracker knows it, and the job succeeds with its one
        attempt, started after the restart (before the gate, the job went onto the phone at
        once and failed with ``no server of key ... within 60 s``: the app did not know the
        new tracker)."""
        farmd = event_farmd()
        assert farmd.tracker is not None
        serves: list[str] = []
        serve = farmd.manager.android.serve

        def counted(serial: str, key: str) -> None:
            serves.append(serial)
            serve(serial, key)

        farmd.manager.android.serve = counted  # type: ignore[method-assign]
        # Which tracker farmd ran, and what its gate said, at each claim: an attempt's
        # started_at is its tick's start, which a slow tick (SQLite locks under CI's
        # load) put 2 s before a claim made after the restart (CI run20).
        at_claims: list[tuple[int | None, str | None]] = []
        claim = farmd.store.claim

        def watched(*args: Any, **kwargs: Any) -> Any:
            tracker = farmd.tracker
            at_claims.append((tracker.pid if tracker is not None else None,
                              farmd.claim_gate()))
            return claim(*args, **kwargs)

        farmd.store.claim = watched  # type: ignore[method-assign]
        old_pid = farmd.tracker.pid
        os.killpg(old_pid, signal.SIGKILL)
        # The kill is delivered, not done, when killpg returns: under load the tracker
        # still ran when a claim of the job queued next looked (its process not yet
        # exited, so the gate open), and the job went onto the phone before the outage
        # began. The outage the test means begins once farmd can see it: the gate closed
        # or, if the restart and the rejoin were quicker than this look, a new tracker.
        wait_until(lambda: farmd.claim_gate() is not None
                   or ((t := farmd.tracker) is not None and t.pid != old_pid),
                   READY_DEADLINE_S, "farmd sees its tracker down")
        job_id = job_id_of(farmctl(farmd, "enqueue", "gemm", "--attempts", "1", *TINY_GEMM))
        new = wait_until(lambda: (t := farmd.tracker) is not None and t.pid != old_pid and t,
                         READY_DEADLINE_S, "a new tracker")
        job = wait_finished(farmd, job_id)
        assert job.state is JobState.SUCCEEDED, job.error
        attempts = farmd.store.attempts(job_id)
        assert [a.state for a in attempts] == [AttemptState.SUCCEEDED]
        assert at_claims and all(pid == new.pid and gate is None for pid, gate in at_claims), (
            f"claimed while the tracker was down or rejoining: {at_claims} (new {new.pid})")
        assert len(serves) == 1, f"the app was started {len(serves)} times for the new tracker"
