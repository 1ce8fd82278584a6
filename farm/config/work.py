"""The settings of the work farm does: jobs' limits, recurring schedules, people's reservations."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from farm.config.base import Frozen


class JobSettings(Frozen):
    """Job execution defaults (a job spec may override timeout and attempts).

    The time limits of one attempt per kind (``farm.kinds``): a tuning run
    measures hundreds of candidates, a timed run only a handful; a kind without
    its own limit uses ``default_timeout_s``. The dispatcher ticks every
    ``tick_interval_s`` and, with ``wake_on_events``, at once when something
    it waits for happens (:mod:`farm.runner.wake`).

    ``warm_children``: fork each attempt's child from a pre-started process
    that has already imported TVM and the job code (:mod:`farm.runner.zygote`)
    instead of starting ``python -m farm.runner.child`` cold; the cold start is
    the fallback while that process is not up.

    ``stop_grace_s``: on SIGTERM, how long running attempts may still finish
    before farmd kills them and requeues their jobs without charging a try. A
    tune loses nothing: its records are checkpointed per measured trial and
    the next attempt resumes from them. Short, so farmd stops within seconds
    (it took 2 minutes before, issue 25).
    """

    default_timeout_s: float = Field(600.0, gt=0)
    model_timeout_s: float = Field(1800.0, gt=0)
    #: One tune attempt's limit: a model's night of tuning (``tune_model_for_s``)
    #: plus its final build and the timing on each phone.
    tune_timeout_s: float = Field(10 * 3600.0, gt=0)
    #: A tune job's budget when its spec gives none. A model is tuned for one
    #: night: until ``tune_model_trials`` are measured or ``tune_model_for_s``
    #: of tuning are spent, whichever comes first; a gemm for ``tune_gemm_trials``.
    tune_model_trials: int = Field(1000, ge=1)
    tune_model_for_s: float = Field(8 * 3600.0, gt=0)
    tune_gemm_trials: int = Field(64, ge=1)
    #: Build processes per tune attempt; 0: the host's cores its other running
    #: tune attempts do not hold, an equal share at most (farm.tuning.cores).
    tune_builder_workers: int = Field(0, ge=0)
    #: Whether a tune attempt builds each batch in the background while it
    #: searches the next (farm.tuning.builder); false: search, build and
    #: measure take turns. Off until a pipelined tune through app crashes and a
    #: farmd kill keeps every record of its work folder in the fleet's records
    #: (tests/fleet/test_fleet_tune_model.py kept 24 of 25, twice).
    tune_pipeline: bool = False
    #: Interleaved rounds in which a tune job times each phone's untuned and tuned
    #: builds after the tuning (farm.sampling.interleaved_rounds): each round times
    #: both, its share of the ``[results]`` sampling each, so a load that changes
    #: meanwhile hits both alike (back to back, one library timed 0.79x itself).
    tune_timing_rounds: int = Field(2, ge=1, le=20)
    default_attempts: int = Field(3, ge=1)
    thermal_wait_deadline_s: float = Field(900.0, gt=0)
    lease_s: float = Field(120.0, gt=0)
    tune_lease_s: float = Field(3600.0, gt=0)
    #: Whether this farmd's idle phones join another host's running model tune job
    #: as a helper attempt, tuning the task rows its main attempt left
    #: (farm.queue.helpers): phones of one model on several hosts tune one model.
    tune_helpers: bool = True
    #: How often a model tune attempt done with its own tasks asks the database
    #: whether another host's attempt of the job still tunes one, or stopped and
    #: left it to take over (farm.tuning.work_progress.TaskWorkProgress.take_over).
    tune_task_poll_s: float = Field(5.0, gt=0)
    #: How long a model tune job's main attempt that shares its tasks leaves the
    #: rows no attempt has claimed yet to a helper, from its own claim (s): done
    #: with its half before then, it waits (the other host's farmd starts the
    #: helper on its next tick, and the helper lists the model's tasks before it
    #: claims), then tunes what is still unclaimed itself.
    tune_helper_wait_s: float = Field(300.0, ge=0)
    #: How long a tune attempt waits for farmd to serve the job's key on all its
    #: devices, or their own keys again afterwards (farm.kinds.serve_keys):
    #: a launch's registration deadline and a recovery step's, with room.
    serve_deadline_s: float = Field(180.0, gt=0)
    #: The dispatcher's safety-net tick (s): farmd also ticks at once on a wake.
    tick_interval_s: float = Field(2.0, gt=0)
    #: Tick on events (an enqueue, an attempt's child exiting, a phone ready);
    #: false leaves only the periodic tick (the old behaviour, for comparison).
    wake_on_events: bool = True
    warm_children: bool = True
    stop_grace_s: float = Field(3.0, ge=0, le=3600)
    #: The most bytes a ``--inputs`` ``.npz`` may hold once loaded, all its arrays
    #: together, by the shapes its ``.npy`` headers declare and by the zip's own
    #: uncompressed sizes (farm.jobs.model_io.npz_members): checked before any
    #: array is read, so a small archive of compressed zeros is refused unread.
    #: 256 MiB is a batch of 340 ImageNet images in float32, past what a phone
    #: feeds one model at once.
    inputs_max_bytes: int = Field(256 * 1024 * 1024, gt=0)


class Schedule(Frozen):
    """A recurring job: a crontab expression (``minute hour day month weekday``) and a job spec.

    The spec is validated by the queue when the schedule fires;
    here only the cron expression is checked.
    """

    cron: str
    spec: dict[str, Any]
    name: str | None = None
    # What each finished run is compared with (regression watch, farm.results.watch):
    # "previous" (per phone, the last earlier finished job of the same spec) or a job id.
    baseline: Literal["previous"] | int | None = None

    @field_validator("baseline", mode="before")
    @classmethod
    def _check_baseline(cls, value: Any) -> Any:
        job_id = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        if value is None or value == "previous" or job_id:
            return value
        raise ValueError(f'must be "previous" or a job id (an integer from 1), not {value!r}')

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str) -> str:
        from apscheduler.triggers.cron import CronTrigger  # the parser farmd uses

        try:
            CronTrigger.from_crontab(value)
        except ValueError as exc:
            raise ValueError(f"bad cron expression {value!r}: {exc}") from None
        return value


class ReservationSettings(Frozen):
    """People's reservations of phones (``farmctl reserve``).

    Attributes:
        default_for_s: how long ``farmctl reserve`` holds a phone without ``--for``.
        max_for_s: the longest reservation ``--for`` may ask for.
        expire_interval_s: how often farmd ends reservations past their end
            time (until then claims already treat those phones as free).
    """

    default_for_s: float = Field(3600.0, gt=0)
    max_for_s: float = Field(7 * 86400.0, gt=0)
    expire_interval_s: float = Field(30.0, gt=0)
