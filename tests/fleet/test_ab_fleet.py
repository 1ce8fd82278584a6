"""A/B jobs through the queue on two virtual phones sharing the host with farmd, at the defaults.

One farmd with two virtual phones for the module, at farm's default
``[results]`` and ``[ab]`` settings (not the fleet tests' plumbing ones), the
phones not made quiet: they and farmd share the host's 2 cores.

- ``farmctl enqueue ab A B --each``: GEMM n=256 against n=260 is slower on
  each phone; n=256 against itself is neither slower nor faster; each decides
  within 3 minutes of phone time; every sample is kept with its build and
  round, and ``farmctl job``/``results`` show the verdicts.
- ``farmctl compare RUN_A RUN_B --confirm`` with one phone throttled to 0.9
  during run B: its A/B job decides "no change", and says the phone moved.
- The regression watch: a run of a slower build (block 16 where the baseline
  had 32) is confirmed the build's regression by its A/B job; an unchanged
  build whose phone was throttled during one run is the phone's finding.

The rates over many tries are ``bench/bench_ab.py``'s (docs/benchmarks.md); a
throttle in the middle of an A/A job is tests/jobs/test_jobs_ab.py's.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from farm.cli.main import cli
from farm.clock import FakeClock, wait_until
from farm.config import AbSettings, Schedule, Settings
from farm.daemon import Farmd
from farm.netaddr import free_port
from farm.queue.models import DeviceState, JobState
from farm.results.watch import RegressionWatch
from farm.virtual.android.spec import profiles
from farm.virtual.fleet import Fleet
from farm.virtual.testing import adb_server

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

#: The phone time an A/B job may take per phone to count as decided in time (3 min).
DECIDES_WITHIN_S = 180.0
READY_DEADLINE_S = 150.0
JOB_DEADLINE_S = 300.0


class Farm:
    """farmd and its two virtual phones, and farmctl on its queue."""

    def __init__(self, farmd: Farmd, fleet: Fleet) -> None:
        self.farmd = farmd
        self.fleet = fleet
        self.store = farmd.store
        self.serials = list(fleet.serials)
        self.config = Path(farmd.data_dir).parent / "farmctl.toml"
        self.config.write_text(f'data_dir = "{farmd.data_dir}"\n'
                               f'database_url = "{farmd.settings.database_url}"\n')

    def farmctl(self, *args: str) -> Any:
        """``farmctl`` on farmd's data folder and queue; returns the click result."""
        return CliRunner().invoke(cli, ["--config", str(self.config), *args])

    def wait_succeeded(self, job_ids: list[int]) -> None:
        """Wait until every job ended; each must have succeeded."""
        wait_until(lambda: all(self.store.get_job(i).state.ended for i in job_ids),
                   JOB_DEADLINE_S, f"jobs {job_ids} ended")
        for job_id in job_ids:
            view = self.store.get_job(job_id)
            assert view.state is JobState.SUCCEEDED, view.error

    def gemm(self, serial: str, **params: int) -> int:
        """A gemm job (n=256 unless given) pinned to ``serial``, waited for."""
        spec = {"kind": "gemm", "params": {"n": 256, **params}, "devices": {"serials": [serial]}}
        job_id = self.store.enqueue(spec, datetime.now(UTC))
        self.wait_succeeded([job_id])
        return job_id


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory, demo_apk_path: Path) -> Iterator[Farm]:
    """farmd at the default [results] and [ab] settings with two ready virtual phones."""
    root = tmp_path_factory.mktemp("ab-fleet")
    with adb_server() as server, contextlib.ExitStack() as stack:
        fleet = stack.enter_context(Fleet(2, specs=profiles(2, "usb-only"), adb_port=server.port,
                                          data_dir=root / "phones"))
        farmd = Farmd(Settings.model_validate({
            "data_dir": str(root / "farm"), "adb": {"port": server.port},
            "apk": {"path": str(demo_apk_path)},
            "tracker": {"port": free_port(), "network": "usb-only"},
            "metrics": {"enabled": False}, "api": {"enabled": False}}))
        stack.callback(farmd.stop)
        farmd.start()
        running = Farm(farmd, fleet)
        wait_until(lambda: all((d := running.store.get_device(s)) is not None
                               and d.state is DeviceState.READY for s in running.serials),
                   READY_DEADLINE_S, "every phone ready")
        yield running


def run_each(farm: Farm, a: str, b: str) -> list[int]:
    """``enqueue ab A B --each``, waited for; the job ids, all succeeded."""
    done = farm.farmctl("enqueue", "ab", a, b, "--each")
    assert done.exit_code == 0, done.output
    job_ids = [int(m) for m in re.findall(r"^  job (\d+) on ", done.output, re.MULTILINE)]
    assert len(job_ids) == len(farm.serials), done.output
    farm.wait_succeeded(job_ids)
    return job_ids


def verdicts(farm: Farm, job_ids: list[int]) -> dict[str, dict[str, Any]]:
    """serial -> its A/B figures, read back from the stored results."""
    out = {}
    for job_id in job_ids:
        [result] = farm.store.results(job_id)
        out.update(result.summary["per_serial"])
    return out


class TestAbOnTwoPhones:
    def test_gemm_256_against_260_and_against_itself(self, farm: Farm) -> None:
        """260 is slower on each phone; 256 against 256 is neither; each decides within 3 min."""
        slower_ids = run_each(farm, "gemm:n=256", "gemm:n=260")
        slower = verdicts(farm, slower_ids)
        same_ids = run_each(farm, "gemm:n=256", "gemm:n=256")
        same = verdicts(farm, same_ids)
        assert set(slower) == set(same) == set(farm.serials)
        for serial in farm.serials:
            assert slower[serial]["verdict"] == "slower", slower[serial]
            assert slower[serial]["ratio"] > 1.05, slower[serial]
            assert same[serial]["verdict"] not in ("slower", "faster"), same[serial]
            assert same[serial]["same_library"] is True
            for figures in (slower[serial], same[serial]):
                assert figures["phone_s"] <= min(DECIDES_WITHIN_S, AbSettings().max_phone_s + 5)
                assert figures["readings_at_rounds"][0] == 0
        [result] = farm.store.results(same_ids[0])
        rounds = same[result.serials[0]]["rounds"]
        assert sorted(result.arms) == ["a"] * rounds + ["b"] * rounds
        assert sorted(r for r in result.rounds if r is not None) == sorted(
            [*range(rounds), *range(rounds)])
        self._shown(farm, slower_ids[0])

    def _shown(self, farm: Farm, job_id: int) -> None:
        """``job`` and ``results`` show the phone's verdict; the rows name build and round."""
        serial = farm.store.get_job(job_id).spec["devices"]["serials"][0]
        for args in (("job", str(job_id)), ("results", "--job", str(job_id))):
            shown = farm.farmctl(*args)
            assert shown.exit_code == 0, shown.output
            assert "A: gemm n=256 float32\nB: gemm n=260 float32" in shown.output
            [line] = [x for x in shown.output.splitlines() if x.startswith(f"{serial}\t")
                      and "slower" in x]
            assert "+" in line and ".." in line, line
        listed = farm.farmctl("results", "--job", str(job_id), "--json")
        assert listed.exit_code == 0, listed.output
        rows = json.loads(listed.output)
        assert {(r["arm"], r["serial"]) for r in rows} == {("a", serial), ("b", serial)}
        assert all(isinstance(r["round"], int) and r["thermal_status"] is not None for r in rows)


def gemm_run(farm: Farm) -> str:
    """``enqueue gemm --n 256 --each`` at the defaults, waited for; its run id."""
    done = farm.farmctl("enqueue", "gemm", "--n", "256", "--each")
    assert done.exit_code == 0, done.output
    run_id = re.search(r"^run (r-[0-9a-f]+):", done.output, re.MULTILINE)
    assert run_id is not None, done.output
    farm.wait_succeeded([int(m) for m in re.findall(r"^  job (\d+) on ", done.output,
                                                    re.MULTILINE)])
    return run_id[1]


class TestCompareConfirm:
    def test_a_phone_throttled_during_one_run_is_the_phone_not_the_build(
            self, farm: Farm) -> None:
        """Throttled to 0.9 during run B only: --confirm's A/B on that phone decides no change.

        The two gemm runs are the same build, so whatever ``compare`` read between
        them (slower, or undecided on noisy samples) was the phone's; the A/B job
        it enqueues there times both in turns and says no change, and says why.
        """
        throttled = farm.serials[0]
        before = gemm_run(farm)
        farm.fleet.throttle(throttled, 0.9)
        try:
            after = gemm_run(farm)
        finally:
            farm.fleet.throttle(throttled, 1.0)
        known = {j.id for j in farm.store.list_jobs(limit=1000)}
        done = farm.farmctl("compare", before, after, "--confirm")
        assert done.exit_code in (0, 4), done.output  # never "slower": no build changed
        ab_lines = [x for x in done.output.splitlines() if x.startswith(f"{throttled}\t")]
        assert any("no change" in x for x in ab_lines), done.output
        if f"{throttled}: the two runs read" in done.output:
            assert "the phone's speed moved between the runs, not the build" in done.output
        confirmed = [j for j in farm.store.list_jobs(limit=1000)
                     if j.kind == "ab" and j.id not in known]
        assert [throttled] in [j.spec["devices"]["serials"] for j in confirmed]
        assert all(len(j.spec["devices"]["serials"]) == 1 for j in confirmed)


class TestRegressionWatch:
    def test_a_slower_build_is_the_builds_and_a_throttled_phone_the_phones(
            self, farm: Farm) -> None:
        """Watched runs at the defaults, each suspected change settled by its A/B job.

        Phone 1: the baseline job builds GEMM 256 in blocks of 32, the watched
        run in blocks of 16 (the same workload label, a slower build): its A/B
        job calls it slower, the build's regression. Phone 2: the same build
        twice, the phone throttled to 0.9 during the second run: never the
        build's regression, and the phone's finding when the runs differed.
        """
        one, two = farm.serials
        baseline = farm.gemm(one, bn=32)
        slower = farm.gemm(one, bn=16)
        night1 = farm.gemm(two)
        farm.fleet.throttle(two, 0.9)
        try:
            night2 = farm.gemm(two)
        finally:
            farm.fleet.throttle(two, 1.0)
        specs = [farm.store.get_job(slower).spec, farm.store.get_job(night2).spec]
        settings = farm.farmd.settings.model_copy(update={"schedules": (
            Schedule(cron="0 1 * * *", spec=specs[0], name="build", baseline=baseline),
            Schedule(cron="0 2 * * *", spec=specs[1], name="phone", baseline="previous"))})
        watch = RegressionWatch(farm.store, settings, FakeClock(start=datetime.now(UTC)))
        first = {r.job_id: r for r in watch.check()}
        assert first[slower].verdict == "suspected", first
        assert first[night2].verdict in ("suspected", "no change"), first

        def settled() -> bool:
            watch.check()
            return not farm.store.suspected_regressions()

        assert wait_until(settled, 2 * JOB_DEADLINE_S, "the A/B jobs settled")
        final = {r.job_id: r for r in farm.store.regressions(limit=10)}
        assert final[slower].verdict == "slower" and final[slower].confirm_job_id, final
        # The same build against itself in turns: never the build's regression. On 2
        # shared, loaded cores the A/B job once read its second side faster (CI).
        assert final[night2].verdict in ("phone", "no change", "faster"), final
        if final[night2].verdict == "phone":
            assert any("not the build's" in e.reason for e in farm.store.device_events(two))
        assert night1 not in final
