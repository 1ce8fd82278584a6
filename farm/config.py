"""farm's settings: a TOML file plus ``FARM_...`` environment overrides, validated once.

Where the file comes from, first match wins: the ``path`` argument (``--config``),
``$FARM_CONFIG``, then ``/etc/farm/farm.toml`` if it exists; with none, every
setting has its default. Environment variables override the file: ``FARM_`` +
the dotted key upper-cased with ``__`` between levels, e.g.
``FARM_ADB__PORT=5038`` or ``FARM_HEALTH__BATTERY_TEMP_MAX_C=38``. A value that
starts with ``[`` or ``{`` is read as JSON (``FARM_ADB__CONNECT='["10.0.0.5:5555"]'``).

A sample ``farm.toml``::

    data_dir = "/var/lib/farm"

    [adb]
    connect = ["192.168.1.20:5555"]

    [tracker]
    phone_host = "10.0.2.2"

    [apk]
    path = "/opt/farm/tvmrpc-release.apk"
    on_signature_clash = "fail"

    [database]
    auto_migrate = true   # false: run 'farmctl db upgrade' yourself

    [retention]
    health_full_days = 1
    run_dirs_max_mb = 2048

    [[schedules]]
    cron = "0 1 * * *"
    spec = { kind = "tune", workload = "resnet18" }

    [[boards]]
    name = "rk3399-1"
    host = "10.0.0.31"
    user = "farm"
    key_file = "/etc/farm/board_ed25519"
    cc = "aarch64-linux-gnu-g++"

Why not pydantic-settings: it reads the process-global ``os.environ``, while
:func:`load_config` takes the environment as an argument so tests stay
hermetic; merging ``FARM_`` variables into the TOML dict is a few lines, and
validation is plain pydantic either way.

Every model is frozen and rejects unknown keys, so a typo in the file is an
error that names the key instead of a setting silently left at its default.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from farm.config_source import DEFAULT_DATA_DIR, DEFAULT_PATH, config_data
from farm.envvars import ENV_PATH, ENV_PREFIX  # noqa: F401 (read here by the tests)
from farm.errors import ConfigError

DATABASE_NAME = "farm.db"
#: A tuning job's tracker key, any kind or kinds (``farm.tvm.keys.job_key``, which
#: config, on the same floor, may not import): reserved, never a pool key.
_JOB_KEY = re.compile(r"[A-Za-z0-9-]+-job-[0-9]+")


def default_database_url(data_dir: Path) -> str:
    """The default ``database_url``: SQLite file ``farm.db`` in ``data_dir``.

    Pure: nothing is created (the store's engine makes the folder when it opens).
    """
    return f"sqlite:///{data_dir / DATABASE_NAME}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _host_port(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not host:port")
    return value


class AdbSettings(_Frozen):
    """The adb server farm uses (one per host) and the phones it connects over TCP.

    Attributes:
        port: the loopback adb server's port (5037 is adb's default).
        binary: the adb executable; None means the one adbutils ships.
        connect: ``host:port`` of adb-over-TCP phones to ``adb connect`` and keep connected.
    """

    port: int = Field(5037, gt=0, lt=65536)
    binary: Path | None = None
    connect: tuple[str, ...] = ()

    @field_validator("connect")
    @classmethod
    def _check_connect(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_host_port(item) for item in value)


class TrackerSettings(_Frozen):
    """The TVM RPC tracker.

    Attributes:
        external: use a tracker someone else runs at host:port instead of
            starting ``tvm.exec.rpc_tracker``.
        host: the address the tracker binds to (or the external one's address).
        port: the tracker's port (9190 is TVM's default).
        phone_host: the address phones use to reach this host in lan mode
            (``10.0.2.2`` for the virtual fleet); None means ``host``.
        key: the prefix of the tracker keys phones register under
            (``<key>-<serial>``, see :mod:`farm.tvm.keys`).
        network: how phones reach the tracker. ``usb-only`` (default): through
            ``adb reverse`` and a relay per phone, which works on any network
            and with several phones per host; ``lan``: directly at
            ``phone_host:port``.
        device_port: the tracker's port as usb-only phones see it (the
            reversed port on the phone); None means ``port``.
        advertise_host: the tracker's address as people and other hosts reach
            it (stored in this host's ``hosts`` row, shown for reservations);
            None means ``host``. Set it when ``host`` is a wildcard (``0.0.0.0``)
            or loopback and several hosts share one database.
    """

    external: bool = False
    host: str = "127.0.0.1"
    port: int = Field(9190, gt=0, lt=65536)
    phone_host: str | None = None
    key: str = Field("android", min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    network: Literal["usb-only", "lan"] = "usb-only"
    device_port: int | None = Field(None, gt=0, lt=65536)
    advertise_host: str | None = Field(None, min_length=1)

    @property
    def advertised_host(self) -> str:
        """The tracker's address as users reach it: ``advertise_host``, else ``host``."""
        return self.advertise_host or self.host


class ApkSettings(_Frozen):
    """The TVM RPC app to install.

    Attributes:
        path: the signed APK (``python -m apk_tools sign`` signs one); None
            means provisioning installs nothing.
        on_signature_clash: what to do when the phone has the app signed by
            another key: ``fail`` (default) or ``uninstall``, which **wipes
            the app's data** and is therefore never implied.
    """

    path: Path | None = None
    on_signature_clash: Literal["fail", "uninstall"] = "fail"


class HealthSettings(_Frozen):
    """Health sweep cadence and the limits a ready phone must meet.

    ``probe_every_sweeps``: every Nth sweep opens a real RPC session to each
    idle ready phone (the tracker keeps listing frozen apps); 0 never.
    ``probe_timeout_s`` bounds one such probe, TVM's import included.
    ``watch_app_events``: follow each ready phone's ``logcat -b events`` and
    restart the app as soon as it dies (``am_proc_died``/``am_crash``) instead
    of at the next sweep; false leaves app deaths to the sweep.
    ``held_interval_s``: how often farmd reads the tracker's summary between
    sweeps to see a person's own session on a phone (:mod:`farm.fleet.held`):
    one small tracker request, so a hand session is seen as held outside
    within about two of these, before a job is sent onto the phone (at the
    sweep's 30 s it took up to a minute and jobs went there meanwhile, issue 26).
    """

    interval_s: float = Field(30.0, gt=0)
    held_interval_s: float = Field(1.0, gt=0)
    probe_every_sweeps: int = Field(4, ge=0)
    probe_timeout_s: float = Field(20.0, gt=0)
    watch_app_events: bool = True
    battery_temp_max_c: float = 35.0
    thermal_status_max: int = Field(0, ge=0, le=6)
    zone_temp_max_c: float = 70.0
    battery_min_pct: float = Field(20.0, ge=0, le=100)
    storage_min_free_mb: int = Field(500, ge=0)
    require_screen_on: bool = True
    cool_margin_c: float = Field(2.0, ge=0)
    require_plugged: bool = False
    #: Thresholds of declared readings with no setting of their own, by name
    #: (``[health.reading_limits] load_1m = 4.0``; :mod:`farm.health.readings`).
    reading_limits: dict[str, float] = Field(default_factory=dict)


class SuperviseSettings(_Frozen):
    """The recovery ladder: exponential backoff and quarantine."""

    backoff_base_s: float = Field(2.0, gt=0)
    backoff_max_s: float = Field(300.0, gt=0)
    quarantine_after: int = Field(5, ge=1)
    quarantine_window_s: float = Field(3600.0, gt=0)
    #: An app that crashes again this soon after a relaunch healed it is in a
    #: crash loop: only such incidents, and those the first relaunch did not
    #: heal, count toward quarantine (farm.supervise.ladder).
    crash_loop_s: float = Field(60.0, ge=0)
    registration_deadline_s: float = Field(60.0, gt=0)

    @model_validator(mode="after")
    def _base_below_max(self) -> SuperviseSettings:
        if self.backoff_base_s > self.backoff_max_s:
            raise ValueError("backoff_base_s must not exceed backoff_max_s")
        return self


class JobSettings(_Frozen):
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


class RetentionSettings(_Frozen):
    """What farm keeps of its history (:mod:`farm.retention`); results are always kept.

    Attributes:
        interval_s: how often farmd applies retention.
        health_full_days: health samples younger than this are all kept.
        health_bucket_s: older ones are thinned to one per phone per bucket.
        run_dirs_max_age_days: run folders (``<data_dir>/runs/attempt-N``) older go.
        run_dirs_max_mb: then the oldest go until the rest fit.
        compile_cache_max_age_days: cached libraries unused for longer go.
        compile_cache_max_mb: then the least recently used go until the rest fit.
    """

    interval_s: float = Field(3600.0, gt=0)
    health_full_days: float = Field(1.0, ge=0)
    health_bucket_s: float = Field(600.0, gt=0)
    run_dirs_max_age_days: float = Field(14.0, ge=0)
    run_dirs_max_mb: float = Field(2048.0, ge=0)
    compile_cache_max_age_days: float = Field(30.0, ge=0)
    compile_cache_max_mb: float = Field(4096.0, ge=0)


class Schedule(_Frozen):
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


class ResultSettings(_Frozen):
    """How a result's spread is judged (``farm.results``), and two results compared.

    Attributes:
        max_cv: a phone's samples whose coefficient of variation (standard
            deviation over mean) is above this fraction are noisy.
        rerun_noisy: a benchmark attempt re-runs a noisy phone's measurement
            once (its samples stored with repetition 1) before it reports.
        change_threshold: the smallest relative change of a phone's median
            timing that counts as slower or faster (0.05 = 5%;
            ``farmctl compare`` and the regression watch).
        alpha: the Mann-Whitney U p-value a change must be below to count.
        min_samples: timed samples a phone's measurement takes at least (after
            warm-up; more if the spec's ``repeat`` asks). 10: twice the 5 a side
            a Mann-Whitney test needs to reach alpha 0.01 at all, so a 5% change
            at a few % CV is found (docs/benchmarks.md, bench/bench_detection.py).
        max_samples: the cap: a measurement stops here even if its median's CI
            is still wider than ``target_ci_pct``.
        min_measure_s: a measurement's samples span this long at least,
            seconds (warm-up not counted): its median then survives a burst of
            host or phone load shorter than half of it, where 10 samples of a
            fast kernel (a quarter second) would all fall in one burst. MLPerf
            Inference's LoadGen likewise asks a minimum duration besides a
            minimum count.
        target_ci_pct: sampling stops once the 95% CI of the median
            is this narrow, % of the median. 4: the ratio of two such medians
            then has a CI of about +-2.8% (sqrt 2 of each half-width), inside a
            5% threshold with room for a small drift, so "no change" can be said.
        warmup_min_s: warm-up lasts at least this long, seconds (AndroidX
            Microbenchmark warms up for at least 250 ms; farm's samples pass
            through RPC, so longer).
        warmup_max_s: warm-up stops here even if the timing is not steady, seconds.
        warmup_steady_pct: warm-up ends when the median of the last 3 samples is
            within this % of the median of the 3 before
            (:mod:`farm.sampling`).
        watch_interval_s: how often farmd's regression watch looks for newly
            finished jobs of schedules with a baseline, seconds.
        watch_lookback_s: the regression watch compares finished jobs this
            recent (seconds) that have no verdict yet.
    """

    max_cv: float = Field(0.05, gt=0, le=10)
    rerun_noisy: bool = True
    change_threshold: float = Field(0.05, gt=0, lt=1)
    alpha: float = Field(0.01, gt=0, lt=1)
    min_samples: int = Field(10, ge=2, le=10_000)
    max_samples: int = Field(60, ge=2, le=10_000)
    target_ci_pct: float = Field(4.0, gt=0, le=100)
    min_measure_s: float = Field(1.0, ge=0, le=600)
    warmup_min_s: float = Field(1.0, ge=0, le=600)
    warmup_max_s: float = Field(10.0, gt=0, le=3600)
    warmup_steady_pct: float = Field(5.0, gt=0, le=100)
    watch_interval_s: float = Field(60.0, gt=0)
    watch_lookback_s: float = Field(86400.0, gt=0)

    @model_validator(mode="after")
    def _bounds_in_order(self) -> ResultSettings:
        if self.min_samples > self.max_samples:
            raise ValueError(f"min_samples ({self.min_samples}) is above max_samples "
                             f"({self.max_samples})")
        if self.warmup_min_s > self.warmup_max_s:
            raise ValueError(f"warmup_min_s ({self.warmup_min_s}) is above warmup_max_s "
                             f"({self.warmup_max_s})")
        return self


class AbSettings(_Frozen):
    """How an A/B job (``farmctl enqueue ab``) times two builds on one phone, and when it stops.

    Each round times one sample of each build in one session (:mod:`farm.jobs.ab`);
    the verdict is judged on the rounds' ratios (:func:`farm.stats.compare_rounds`)
    against ``[results] change_threshold`` and ``alpha``.

    Attributes:
        min_rounds: rounds before the first look at the verdict.
        look_every: rounds between looks after the first; each look is a
            chance to decide wrongly, so looks are spaced.
        max_rounds: rounds at most per phone.
        max_phone_s: phone time at most per phone, seconds: the timed
            samples' wall time, warm-up included (thermal waits not). 120: a
            1 ms model at the spread of a virtual phone sharing a 2-core host
            decides in under 30 s (docs/benchmarks.md, ``bench/bench_ab.py``).
        min_sample_s: one sample of a build runs its kernel this long at
            least, seconds (the runs per sample are raised to reach it): many
            periods of a phone's DVFS and of a virtual phone's throttle.
        confidence: the level of the ratio's interval; 99% because the
            rounds are looked at again and again (:func:`farm.stats.compare_rounds`).
        order: ``abba``: A first in even rounds, B first in odd ones;
            ``random``: a seeded coin per round.
        snapshot_every_s: the phone's readings are taken (and the thermal
            gate passed) before the first round and then this often, seconds.
    """

    min_rounds: int = Field(20, ge=8, le=100_000)
    look_every: int = Field(10, ge=1, le=100_000)
    max_rounds: int = Field(5000, ge=8, le=1_000_000)
    max_phone_s: float = Field(120.0, gt=0, le=86_400)
    min_sample_s: float = Field(0.025, gt=0, le=60)
    confidence: float = Field(0.99, gt=0.5, lt=1)
    order: Literal["abba", "random"] = "abba"
    snapshot_every_s: float = Field(15.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _rounds_in_order(self) -> AbSettings:
        if self.min_rounds > self.max_rounds:
            raise ValueError(f"min_rounds ({self.min_rounds}) is above max_rounds "
                             f"({self.max_rounds})")
        return self


class HostSettings(_Frozen):
    """This farmd's liveness in a database several hosts share (:mod:`farm.queue.hosts`).

    Attributes:
        heartbeat_s: how often farmd stamps its ``hosts`` row, seconds.
        dead_after_s: a host whose stamp is older than this is dead: its phones
            show as ``unreachable`` and another host's adb server may take them
            over. Several heartbeats long, so one slow database write is not a death.
    """

    heartbeat_s: float = Field(10.0, gt=0)
    dead_after_s: float = Field(60.0, gt=0)

    @model_validator(mode="after")
    def _beats_before_death(self) -> HostSettings:
        if self.dead_after_s <= 2 * self.heartbeat_s:
            raise ValueError("dead_after_s must exceed two heartbeats (2 * heartbeat_s)")
        return self


class MetricsSettings(_Frozen):
    """The Prometheus endpoint farmd serves."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(9464, gt=0, lt=65536)


class ApiSettings(_Frozen):
    """The HTTP API and dashboard farmd serves (:mod:`farm.api`).

    It is bound to loopback unless ``host`` says otherwise; TLS is left to a
    reverse proxy in front of it (docs/architecture.md, "HTTP API").

    Attributes:
        upload_max_bytes: the largest model upload (``POST /api/v1/blobs``) taken:
            256 MB holds real models (ResNet-50 is 100 MB, BERT-base 440 MB in
            fp32 is past it: raise it for such models, issue 26).
        uploads_per_token: uploads one token runs at once; more wait their turn
            (each is spooled to disk, then read whole once it is a valid model).
        upload_read_timeout_s: the longest an upload's client may send nothing
            before it is cut off (408): a client that declares a body and stalls
            holds its token's slot no longer than this. Uvicorn puts no limit on
            a body's pauses of its own.
    """

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(9465, gt=0, lt=65536)
    upload_max_bytes: int = Field(256 * 1024 * 1024, gt=0)
    uploads_per_token: int = Field(2, gt=0)
    upload_read_timeout_s: float = Field(30.0, gt=0, le=3600)


class WebSettings(_Frozen):
    """The dashboard's pages (:mod:`farm.web`), served with the API.

    ``poll_s``: how often the live pages (fleet, queue, a job) fetch their JSON;
    ``slow_poll_s``: the same for the comparison and history pages, whose
    statistics (bootstrap CIs) cost more. ``incidents``: device events shown per
    phone on the fleet page; ``recent_ends``: ended jobs on the queue page;
    ``history_limit``: newest results read for a workload's history.
    """

    poll_s: float = Field(2.0, gt=0)
    slow_poll_s: float = Field(30.0, gt=0)
    incidents: int = Field(3, ge=0, le=100)
    recent_ends: int = Field(20, ge=1, le=1000)
    history_limit: int = Field(1000, ge=1)


class DatabaseSettings(_Frozen):
    """How farm treats the queue database's schema (the URL is ``database_url``).

    Attributes:
        auto_migrate: farmd and farmctl migrate the schema to the newest
            revision when they open the database (once, however many open it
            together). Off, a store opened on an older schema fails with an
            error naming ``farmctl db upgrade``, which a team runs explicitly,
            e.g. before upgrading farm on every host.
        unreachable_wait_s: how long an attempt's child that cannot reach the
            database server waits for it, trying again every few seconds,
            before it hands the attempt back (an outage costs no try). farmd
            heartbeats the attempt meanwhile, so this stays well inside
            ``[jobs] lease_s``.
    """

    auto_migrate: bool = True
    unreachable_wait_s: float = Field(60.0, ge=0, le=3600)


class VirtualSettings(_Frozen):
    """Virtual phones farmd starts for a demo (``farmd --virtual-phones N`` overrides count).

    Attributes:
        count: how many phones.
        network: how the phones reach the host. Unset in a :class:`Settings`,
            it follows ``tracker.network``, so the phones fit the way farmd
            reaches them (lan phones under a usb-only farmd bind 5001, 5002,
            ... and get tunnels they do not need; usb-only phones under a lan
            farmd never reach the tracker).
        same_model: every phone of one model (``farmd --same-model``): a tuning
            job over ``phones = 2`` needs two phones of one model, and the
            default fleet cycles through four models.
    """

    count: int = Field(0, ge=0)
    network: Literal["lan", "usb-only"] = "usb-only"
    same_model: bool = False


class BoardSettings(_Frozen):
    """One Linux board farm reaches over SSH (``[[boards]]``, one table per board).

    Attributes:
        name: the board's serial in farm (``devices.serial``): letters, digits, ``-``.
        host: the board's SSH address.
        port: its SSH port.
        user: the SSH user farm logs in as.
        key_file: the private key farm logs in with; None = the SSH agent and
            ``~/.ssh/id_*``.
        known_hosts: a known_hosts file holding the board's host key; None =
            ``~/.ssh/known_hosts``.
        host_key_policy: ``strict`` refuses a board whose host key is not known;
            ``accept-new`` trusts the first key seen (and writes it to
            ``known_hosts`` when set), refusing a changed one later.
        tracker_key: the tracker key its RPC server registers under; None =
            ``board-<name>``.
        python: the board's Python interpreter (for ``server = "python"``).
        server: ``python`` runs ``<python> -m tvm.exec.rpc_server``; any other
            value is the path of the C++ ``tvm_rpc`` binary on the board.
        work_dir: the board's working folder for farm (pidfile, server log,
            session files); relative paths are under the user's home.
        tracker_host: the address the board dials the tracker at; None =
            ``tracker.phone_host`` or ``tracker.host``.
        tracker_via: how the board's server reaches the tracker. ``direct``: it
            dials ``tracker_host``; ``forward``: an SSH remote port forward on the
            board's loopback carries it to the tracker (like ``adb reverse``), and
            the server reports ``host`` as its address; ``auto``: ``forward`` when
            ``tracker_host`` is a loopback address and the board is not local.
        reboot_allowed: whether recovery may ``reboot`` the board (needs
            passwordless ``sudo reboot`` or root).
        cc: the cross compiler that links kernels for the board, e.g.
            ``aarch64-linux-gnu-g++`` (Debian's ``g++-aarch64-linux-gnu``);
            None = the host compiler, for boards of the host's own ``uname -m``.
        sysfs_root: where the board's sysfs is (``/sys``); virtual boards fake
            thermal zones under their sandbox.
        connect_timeout_s: SSH connect and authentication deadline.
        command_timeout_s: deadline of one remote command.
    """

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9-]*$")
    host: str = Field(min_length=1)
    port: int = Field(22, gt=0, lt=65536)
    user: str = Field(min_length=1)
    key_file: Path | None = None
    known_hosts: Path | None = None
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    tracker_key: str | None = Field(None, min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    python: str = Field("python3", min_length=1)
    server: str = Field("python", min_length=1)
    work_dir: str = Field("farm-board", min_length=1)
    tracker_host: str | None = None
    tracker_via: Literal["auto", "direct", "forward"] = "auto"
    reboot_allowed: bool = False
    cc: str | None = None
    sysfs_root: str = Field("/sys", min_length=1)
    connect_timeout_s: float = Field(10.0, gt=0)
    command_timeout_s: float = Field(30.0, gt=0)


class GpuSettings(_Frozen):
    """This host's NVIDIA GPUs as fleet devices (kind ``gpu``, :mod:`farm.controllers.gpu`).

    Attributes:
        enabled: whether farmd looks for GPUs through NVML (needs the ``gpu``
            extra, ``nvidia-ml-py``, and an NVIDIA driver).
        gpus: which GPUs to serve, by NVML index (``"0"``) or UUID
            (``"GPU-5c3f..."``); empty serves every GPU NVML lists.
        temp_max_c: above this core temperature the GPU cools (thermal gating
            waits). 83 °C is farm's choice, under the slowdown threshold an H100
            reports through NVML (``slowdown_temp_c`` in
            ``tests/fixtures/nvml/h100_idle.json``); a GPU slowing itself for
            heat cools whatever its temperature.
        key_prefix: tracker keys are ``<prefix>-<first 8 hex digits of the UUID>``.
        server_host: the address each GPU's RPC server binds and announces.
    """

    enabled: bool = False
    gpus: tuple[str, ...] = ()
    temp_max_c: float = Field(83.0, gt=0)
    key_prefix: str = Field("gpu", min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    server_host: str = "127.0.0.1"


class ProxySettings(_Frozen):
    """A ``tvm.exec.rpc_proxy`` for devices that connect out (iOS RPC app, a browser).

    Attributes:
        enabled: whether farmd runs the proxy, registered at its tracker.
        host: the address the proxy binds.
        port: where devices connect (``is_proxy`` RPC servers, the iOS app).
        web_port: the proxy's websocket port for browsers; 0 = none.
    """

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(9091, gt=0, lt=65536)
    web_port: int = Field(0, ge=0, lt=65536)


class ReservationSettings(_Frozen):
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


class PoolSelection(_Frozen):
    """The phones one ``pool.keys`` entry offers; every attribute given must match."""

    abi: str | None = None  # e.g. "arm64-v8a", one of ro.product.cpu.abilist
    soc: str | None = None  # e.g. "SM8150", case-insensitive
    gpu: str | None = None  # substring of the GPU renderer, e.g. "adreno"
    sdk_min: int | None = Field(None, ge=1)


class PoolSettings(_Frozen):
    """A shared tracker key under which idle phones also serve stock scripts.

    A script written for the stock workflow, ``connect_tracker(host,
    port).request(key)``, gets a free phone (:mod:`farm.fleet.pool`). Only
    usb-only phones (``tracker.network``) are pooled: farm learns the app's
    registration from their relay.

    Attributes:
        key: the shared key every idle phone serves, e.g. ``android``; None
            (default) and no ``keys``: no pool. It may equal ``tracker.key``:
            farm itself only requests ``<tracker.key>-<serial>`` and
            ``<tracker.key>-job-<id>``, so no pool key may start with
            ``<tracker.key>-``.
        keys: more shared keys, each served by the idle phones its selection
            matches, e.g. ``{"arm64" = {abi = "arm64-v8a"}, "sm8150" = {soc =
            "SM8150"}}``.
        interval_s: how often farm offers newly idle phones and withdraws
            busy, reserved or unhealthy ones.
    """

    key: str | None = Field(None, min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    keys: dict[Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9-]+$")],
               PoolSelection] = {}
    interval_s: float = Field(1.0, gt=0)


class Settings(_Frozen):
    """All of farm's settings (see the module doc for sources and a sample file).

    Attributes:
        data_dir: farm's data folder (database, logs, caches).
        database_url: SQLAlchemy URL; defaults to SQLite ``farm.db`` in ``data_dir``.
        database: schema handling (``[database] auto_migrate``).
        log_level: debug, info, warning, error or critical.
        host_id: names this host's farmd in the shared database (attempts it
            runs carry it); defaults to the host name. Two farmd sharing one
            database must have different host ids.
    """

    data_dir: Path = Field(Path(DEFAULT_DATA_DIR), validate_default=True)
    host_id: str = Field(default_factory=socket.gethostname, min_length=1, max_length=128)
    database_url: str = ""
    database: DatabaseSettings = DatabaseSettings()
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    adb: AdbSettings = AdbSettings()
    tracker: TrackerSettings = TrackerSettings()
    apk: ApkSettings = ApkSettings()
    health: HealthSettings = HealthSettings()
    supervise: SuperviseSettings = SuperviseSettings()
    jobs: JobSettings = JobSettings()
    retention: RetentionSettings = RetentionSettings()
    schedules: tuple[Schedule, ...] = ()
    hosts: HostSettings = HostSettings()
    metrics: MetricsSettings = MetricsSettings()
    api: ApiSettings = ApiSettings()
    web: WebSettings = WebSettings()
    results: ResultSettings = ResultSettings()
    ab: AbSettings = AbSettings()
    virtual: VirtualSettings = VirtualSettings()
    boards: tuple[BoardSettings, ...] = ()
    reservations: ReservationSettings = ReservationSettings()
    pool: PoolSettings = PoolSettings()
    gpu: GpuSettings = GpuSettings()
    proxy: ProxySettings = ProxySettings()

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @model_validator(mode="after")
    def _default_database(self) -> Settings:
        if not self.database_url:
            # Frozen model: set the derived default once, during validation.
            object.__setattr__(self, "database_url", default_database_url(self.data_dir))
        return self

    @field_validator("boards")
    @classmethod
    def _unique_boards(cls, value: tuple[BoardSettings, ...]) -> tuple[BoardSettings, ...]:
        names = [board.name for board in value]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"board names must be unique; repeated: {', '.join(twice)}")
        return value

    @model_validator(mode="after")
    def _pool_key_apart(self) -> Settings:
        """No pool key may be a key farm's own devices or jobs serve.

        Phones serve ``<tracker.key>-<serial>``; a tuning job's devices
        ``<kind>-job-<id>`` (``farm.tvm.keys.job_key``: ``gpu-job-3``,
        ``board-job-3``, ``board-gpu-job-3`` for several kinds); a board
        ``board-<name>`` or its ``tracker_key``; a GPU ``<gpu.key_prefix>-<8 hex
        digits>``. An idle phone offered under such a key would answer a
        request meant for a job's or another device's session.
        """
        boards = {board.tracker_key or f"board-{board.name}" for board in self.boards}
        gpu = re.compile(rf"{re.escape(self.gpu.key_prefix)}-[0-9a-f]{{8}}")
        for key in [*self.pool.keys, *([self.pool.key] if self.pool.key else [])]:
            if key.startswith(f"{self.tracker.key}-"):
                raise ValueError(f"pool key {key!r} must not start with {self.tracker.key!r}-: "
                                 "farm's own phone and job keys do")
            if _JOB_KEY.fullmatch(key):
                raise ValueError(f"pool key {key!r} is reserved: farm's tuning jobs serve "
                                 "<kind>-job-<id> keys")
            if key in boards or gpu.fullmatch(key):
                raise ValueError(f"pool key {key!r} is reserved: a board or GPU of this farm "
                                 "registers under it")
        return self

    @model_validator(mode="before")
    @classmethod
    def _virtual_follows_tracker(cls, data: Any) -> Any:
        """Fill an unset ``virtual.network`` from ``tracker.network``.

        This runs before validation, so a bad tracker value is reported as the
        tracker's.
        """
        if not isinstance(data, dict):
            return data
        virtual, tracker = data.get("virtual", {}), data.get("tracker", {})
        if not isinstance(virtual, dict) or "network" in virtual:
            return data
        network = (tracker.get("network") if isinstance(tracker, dict)
                   else getattr(tracker, "network", None))
        if network is None:
            network = TrackerSettings.model_fields["network"].default
        return {**data, "virtual": {**virtual, "network": network}}


def _prefixes(key: str) -> list[str]:
    """``"a.b.c"`` -> ``["a.b.c", "a.b", "a"]``."""
    parts = key.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Load and validate the settings.

    Args:
        path: the TOML file (``--config``); None means ``$FARM_CONFIG``, then
            ``/etc/farm/farm.toml`` if it exists, else defaults only.
        env: the environment to read ``FARM_CONFIG`` and ``FARM_...`` overrides
            from; ``os.environ`` if None.

    Returns:
        The frozen settings.

    Raises:
        ConfigError: the file is missing (when named explicitly), unreadable or
            not TOML, or a value is invalid; ``key`` is the dotted setting name
            (e.g. ``health.battery_temp_max_c``) and the reason says which
            environment variable set it, if one did.
    """
    data, sources = config_data(path, os.environ if env is None else env, DEFAULT_PATH)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        reason = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            reason = "unknown setting"
        # The variable that set this key or one of its parents, e.g. $FARM_SCHEDULES.
        origin = next((sources[k] for k in _prefixes(key) if k in sources), None)
        if origin is not None:
            reason += f" (from ${origin})"
        raise ConfigError(key, reason) from None
