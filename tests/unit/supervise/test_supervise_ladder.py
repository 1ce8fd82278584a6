"""The recovery ladder policy: climbing, backoff, quarantine, resets; pure and time-injected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from farm.backoff import backoff_s
from farm.config import SuperviseSettings
from farm.errors import ConfigError
from farm.supervise import (
    Failure,
    LadderPolicy,
    Recovery,
    Released,
    Step,
    Wait,
    incident_open,
    next_step,
    quarantined,
)

T0 = datetime(2025, 6, 1, 3, 0, tzinfo=UTC)
POLICY = LadderPolicy()


def at(seconds: float) -> datetime:
    """The instant ``seconds`` after T0."""
    return T0 + timedelta(seconds=seconds)


def failing_history(failed: int, step_gap_s: float = 1.0) -> list:
    """One incident at T0, then ``failed`` failed steps, each the one the ladder picks when due."""
    history: list = [Failure(T0, "app_running false")]
    for n in range(failed):
        due = history[-1].at + timedelta(
            seconds=backoff_s(n, POLICY.backoff_base_s, POLICY.backoff_max_s)
        )
        step = next_step(history, due, POLICY)
        assert isinstance(step, Step)
        history.append(Recovery(due + timedelta(seconds=step_gap_s), step, ok=False))
    return history


def crash_loop(incidents: int, gap_s: float) -> list:
    """``incidents`` crashes ``gap_s`` apart, each fixed by one restart; the last still open."""
    history: list = []
    for i in range(incidents):
        history.append(Failure(at(i * gap_s), "fatal_exception_seen true"))
        if i < incidents - 1:
            history.append(Recovery(at(i * gap_s + 1), Step.RESTART_APP, ok=True))
    return history


class TestLadderPolicy:
    @pytest.mark.parametrize(
        ("changes", "key"),
        [
            ({"rungs": ()}, "supervise.rungs"),
            ({"rungs": (Step.REBOOT, Step.REBOOT)}, "supervise.rungs"),
            ({"rungs": (Step.RESTART_APP, Step.QUARANTINE)}, "supervise.rungs"),
            ({"attempts_per_rung": 0}, "supervise.attempts_per_rung"),
            ({"backoff_base_s": 0.0}, "supervise.backoff_base_s"),
            ({"backoff_base_s": 400.0, "backoff_max_s": 300.0}, "supervise.backoff_base_s"),
            ({"quarantine_after": 0}, "supervise.quarantine_after"),
            ({"window_s": 0.0}, "supervise.quarantine_window_s"),
        ],
    )
    def test_rejects_bad_values(self, changes: dict, key: str) -> None:
        """An unusable policy raises ConfigError naming the key at construction."""
        with pytest.raises(ConfigError) as info:
            LadderPolicy(**changes)
        assert info.value.key == key

    def test_from_settings(self) -> None:
        """The [supervise] config section maps onto the policy, extra fields by override."""
        settings = SuperviseSettings(
            backoff_base_s=1.0, backoff_max_s=60.0, quarantine_after=3, quarantine_window_s=600.0
        )
        policy = LadderPolicy.from_settings(settings, attempts_per_rung=1)
        assert policy == LadderPolicy(
            backoff_base_s=1.0, backoff_max_s=60.0, quarantine_after=3, window_s=600.0,
            attempts_per_rung=1,
        )

    def test_defaults_match_config_defaults(self) -> None:
        """LadderPolicy() and the config's default [supervise] section agree."""
        assert LadderPolicy.from_settings(SuperviseSettings()) == LadderPolicy()


class TestBackoff:
    def test_documented_sequence(self) -> None:
        """With the defaults the waits are 0, 2, 4, 8, ... capped at 300 s."""
        waits = [backoff_s(n, POLICY.backoff_base_s, POLICY.backoff_max_s) for n in range(12)]
        assert waits == [0.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0, 300.0]

    @given(n=st.integers(0, 10_000), base_s=st.floats(0.01, 100), extra_s=st.floats(0, 10_000))
    def test_monotone_and_capped(self, n: int, base_s: float, extra_s: float) -> None:
        """The wait never decreases with more failures and never exceeds the cap."""
        assert (
            backoff_s(n, base_s, base_s + extra_s)
            <= backoff_s(n + 1, base_s, base_s + extra_s)
            <= base_s + extra_s
        )


class TestNextStep:
    def test_nothing_to_do_without_failure(self) -> None:
        """An empty history or a closed incident needs no action."""
        assert next_step([], T0, POLICY) is None
        closed = [Failure(T0), Recovery(at(2), Step.RESTART_APP, ok=True)]
        assert next_step(closed, at(3), POLICY) is None

    def test_first_failure_restarts_at_once(self) -> None:
        """A freshly crashed app is restarted immediately, no wait."""
        assert next_step([Failure(T0)], T0, POLICY) is Step.RESTART_APP

    def test_waits_after_a_failed_step(self) -> None:
        """After a failed restart the ladder waits the base backoff, then retries."""
        history = [Failure(T0), Recovery(at(3), Step.RESTART_APP, ok=False)]
        assert next_step(history, at(4), POLICY) == Wait(at(5))
        assert next_step(history, at(5), POLICY) is Step.RESTART_APP

    def test_climbs_in_order_then_quarantines(self) -> None:
        """Each rung is tried attempts_per_rung times, then the next; then quarantine."""
        seen = []
        for failed in range(0, 2 * len(POLICY.rungs), 2):
            history = failing_history(failed)
            last_s = (history[-1].at - T0).total_seconds()
            seen.append(next_step(history, at(last_s + 10_000), POLICY))
        assert seen == list(POLICY.rungs)
        exhausted = failing_history(2 * len(POLICY.rungs))
        assert next_step(exhausted, at(10**6), POLICY) is Step.QUARANTINE

    def test_success_resets_climb_and_backoff(self) -> None:
        """After a success, the next incident starts again at restart_app with no wait."""
        history = [*failing_history(5), Recovery(at(5000), Step.REINSTALL, ok=True)]
        history.append(Failure(at(6000)))
        assert next_step(history, at(6000), POLICY) is Step.RESTART_APP

    def test_repeated_failure_in_open_incident_counts_once(self) -> None:
        """Sweeps that keep seeing the same outage do not add incidents."""
        history = [Failure(at(i)) for i in range(20)]
        assert next_step(history, at(20), POLICY) is Step.RESTART_APP

    def test_quarantined_phone_gets_nothing_until_released(self) -> None:
        """After quarantine nothing happens; a release forgets everything before it."""
        history = [*crash_loop(5, gap_s=60), Recovery(at(300), Step.QUARANTINE, ok=True)]
        history.append(Failure(at(400)))
        assert next_step(history, at(400), POLICY) is None
        history += [Released(at(500)), Failure(at(600))]
        assert next_step(history, at(600), POLICY) is Step.RESTART_APP

    def test_ignores_future_events(self) -> None:
        """Events stamped after now (clock skew) do not influence the decision."""
        history = [Failure(T0), Recovery(at(100), Step.RESTART_APP, ok=True)]
        assert next_step(history, at(50), POLICY) is Step.RESTART_APP

    def test_order_of_history_irrelevant(self) -> None:
        """The history may come in any order; it is read in time order."""
        history = failing_history(3)
        assert next_step(history[::-1], at(10**5), POLICY) == next_step(history, at(10**5), POLICY)

    @given(failed=st.integers(0, 2 * len(POLICY.rungs) - 2), gap_s=st.floats(0, 50))
    def test_backoff_never_decreases_until_success(self, failed: int, gap_s: float) -> None:
        """Within one incident each wait is at least the previous one and at most the cap."""
        history = failing_history(failed + 1, step_gap_s=gap_s)
        waits = []
        for n in range(1, failed + 2):
            prefix = history[: n + 1]
            decision = next_step(prefix, prefix[-1].at, POLICY)
            assert isinstance(decision, Wait)
            waits.append((decision.until - prefix[-1].at).total_seconds())
        assert waits == sorted(waits)
        assert max(waits) <= POLICY.backoff_max_s

    @given(
        quarantine_after=st.integers(1, 8),
        incidents=st.integers(1, 10),
        gap_s=st.floats(1.5, POLICY.crash_loop_s),
    )
    def test_quarantine_exactly_at_n_in_window(
        self, quarantine_after: int, incidents: int, gap_s: float
    ) -> None:
        """A crash loop inside the window quarantines exactly when incidents reach N."""
        policy = LadderPolicy(quarantine_after=quarantine_after, window_s=gap_s * incidents + 1)
        history = crash_loop(incidents, gap_s)
        decision = next_step(history, history[-1].at, policy)
        assert (decision is Step.QUARANTINE) == (incidents >= quarantine_after)
        if incidents < quarantine_after:
            assert decision is Step.RESTART_APP

    def test_window_edge(self) -> None:
        """An incident exactly window_s old no longer counts; one a moment younger does."""
        policy = LadderPolicy(quarantine_after=2, window_s=100, crash_loop_s=200)
        history = crash_loop(2, gap_s=100)
        assert next_step(history, at(100), policy) is Step.RESTART_APP
        history = crash_loop(2, gap_s=99.5)
        assert next_step(history, at(99.5), policy) is Step.QUARANTINE

    @given(old=st.integers(0, 20), recent=st.integers(1, 4), window_s=st.floats(100, 10_000))
    def test_incidents_outside_window_forgotten(
        self, old: int, recent: int, window_s: float
    ) -> None:
        """Incidents older than the window do not count toward quarantine."""
        policy = LadderPolicy(quarantine_after=5, window_s=window_s)
        ancient = crash_loop(old, gap_s=1.5) if old else []
        if ancient:
            ancient.append(Recovery(at(old * 1.5), Step.RESTART_APP, ok=True))
        start_s = old * 1.5 + window_s + 10
        now_loop = [
            type(e)(**{**e.__dict__, "at": e.at + timedelta(seconds=start_s)})
            for e in crash_loop(recent, gap_s=2)
        ]
        now = now_loop[-1].at
        assert next_step(ancient + now_loop, now, policy) == next_step(now_loop, now, policy)
        assert next_step(ancient + now_loop, now, policy) is Step.RESTART_APP


    def test_isolated_crashes_healed_at_once_never_quarantine(self) -> None:
        """A crash every two minutes, each healed by the first relaunch: no quarantine at the
        defaults, however many (the 30-minute soak's two phones, a crash a minute between them)."""
        history = crash_loop(30, gap_s=120)
        assert next_step(history, history[-1].at, POLICY) is Step.RESTART_APP

    def test_crash_loop_and_hard_heals_count(self) -> None:
        """An incident counts when the app crashed again within crash_loop_s of its heal, or when
        the first rung failed first; with quarantine_after such incidents the phone is out."""
        policy = LadderPolicy(quarantine_after=3)
        hard = [Failure(at(0), "app_running false"), Recovery(at(1), Step.RESTART_APP, ok=False),
                Recovery(at(5), Step.RESTART_APP, ok=True)]
        looping = [Failure(at(600), "am_crash"), Recovery(at(601), Step.RESTART_APP, ok=True),
                   Failure(at(601 + policy.crash_loop_s - 1), "am_crash")]
        assert next_step(hard + looping, looping[-1].at, policy) is Step.QUARANTINE
        stayed_up = [*looping[:2], Failure(at(601 + policy.crash_loop_s), "am_crash")]
        assert next_step(hard + stayed_up, stayed_up[-1].at, policy) is Step.RESTART_APP

    def test_held_device_is_healed_not_quarantined_by_count(self) -> None:
        """While a hold asks it to serve a key the count does not quarantine it (the rung runs);
        running out of rungs still does."""
        looping = crash_loop(POLICY.quarantine_after, gap_s=5)
        assert next_step(looping, looping[-1].at, POLICY) is Step.QUARANTINE
        assert next_step(looping, looping[-1].at, POLICY, held=True) is Step.RESTART_APP
        policy = LadderPolicy(rungs=(Step.RESTART_APP,), attempts_per_rung=1)
        spent = [Failure(at(0)), Recovery(at(1), Step.RESTART_APP, ok=False)]
        assert next_step(spent, at(60), policy, held=True) is Step.QUARANTINE


class TestQuarantined:
    def test_only_a_quarantine_since_the_last_release_counts(self) -> None:
        """Failures and reboots are not quarantine; a release ends it; a later one counts."""
        failing = [Failure(at(0), "app_running false"), Recovery(at(1), Step.REBOOT, True)]
        assert not quarantined(failing)
        jailed = [
            *failing,
            Recovery(at(2), Step.QUARANTINE, True),
            Failure(at(3), "probe_ok false"),
        ]
        assert quarantined(jailed)
        assert not quarantined([*jailed, Released(at(4))])
        assert quarantined([*jailed, Released(at(4)), Recovery(at(5), Step.QUARANTINE, True)])


class TestIncidentOpen:
    def test_open_until_a_step_works(self) -> None:
        """A failure opens an incident; a failed step keeps it open; a working one closes it."""
        assert not incident_open([], T0)
        history: list = [Failure(T0, "app_running false")]
        assert incident_open(history, at(1))
        history.append(Recovery(at(2), Step.RESTART_APP, ok=False))
        assert incident_open(history, at(3))
        history.append(Recovery(at(4), Step.FORCE_STOP_RELAUNCH, ok=True))
        assert not incident_open(history, at(5))

    def test_quarantined_until_released(self) -> None:
        """A quarantined phone's failures are not new incidents until a release."""
        history: list = [Failure(T0), Recovery(at(1), Step.QUARANTINE, ok=True)]
        assert incident_open(history, at(2))
        assert not incident_open([*history, Released(at(3))], at(4))
