"""What farmd serves and keeps: database, hosts, metrics, API, dashboard, retention."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from farm.config.base import Frozen

DATABASE_NAME = "farm.db"


def default_database_url(data_dir: Path) -> str:
    """The default ``database_url``: SQLite file ``farm.db`` in ``data_dir``.

    Pure: nothing is created (the store's engine makes the folder when it opens).
    """
    return f"sqlite:///{data_dir / DATABASE_NAME}"


class DatabaseSettings(Frozen):
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


class HostSettings(Frozen):
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


class MetricsSettings(Frozen):
    """The Prometheus endpoint farmd serves."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(9464, gt=0, lt=65536)


class ApiSettings(Frozen):
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


class WebSettings(Frozen):
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


class RetentionSettings(Frozen):
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
