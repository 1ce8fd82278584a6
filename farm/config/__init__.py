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

Each section's settings class lives in the module of its area (``phones``,
``tracker``, ``devices``, ``work``, ``results``, ``service``), with its defaults;
this module gathers them into :class:`Settings`, reads them and is where
callers import every name from.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from farm.config.base import Frozen
from farm.config.devices import BoardSettings, GpuSettings, ProxySettings
from farm.config.phones import (
    AdbSettings,
    ApkSettings,
    HealthSettings,
    SuperviseSettings,
    VirtualSettings,
)
from farm.config.results import AbSettings, ResultSettings
from farm.config.service import (
    DATABASE_NAME,
    ApiSettings,
    DatabaseSettings,
    HostSettings,
    MetricsSettings,
    RetentionSettings,
    WebSettings,
    default_database_url,
)
from farm.config.tracker import PoolSelection, PoolSettings, TrackerSettings
from farm.config.work import JobSettings, ReservationSettings, Schedule
from farm.config_source import DEFAULT_DATA_DIR, DEFAULT_PATH, config_data
from farm.envvars import ENV_PATH, ENV_PREFIX
from farm.errors import ConfigError

#: The names callers import from ``farm.config``: each section's settings live in
#: the module of its area (``phones``, ``tracker``, ``devices``, ``work``,
#: ``results``, ``service``); ``Settings`` gathers them and :func:`load_config`
#: reads them. ``ENV_PATH`` and ``ENV_PREFIX`` are read here by the tests.
__all__ = [
    "DATABASE_NAME",
    "DEFAULT_DATA_DIR",
    "DEFAULT_PATH",
    "ENV_PATH",
    "ENV_PREFIX",
    "AbSettings",
    "AdbSettings",
    "ApiSettings",
    "ApkSettings",
    "BoardSettings",
    "DatabaseSettings",
    "GpuSettings",
    "HealthSettings",
    "HostSettings",
    "JobSettings",
    "MetricsSettings",
    "PoolSelection",
    "PoolSettings",
    "ProxySettings",
    "ReservationSettings",
    "ResultSettings",
    "RetentionSettings",
    "Schedule",
    "Settings",
    "SuperviseSettings",
    "TrackerSettings",
    "VirtualSettings",
    "WebSettings",
    "default_database_url",
    "load_config",
]

#: A tuning job's tracker key, any kind or kinds (``farm.tvm.keys.job_key``, which
#: config, on the same floor, may not import): reserved, never a pool key.
_JOB_KEY = re.compile(r"[A-Za-z0-9-]+-job-[0-9]+")


class Settings(Frozen):
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
