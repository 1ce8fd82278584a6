"""The job spec: what a user asks the farm to run, validated before it is stored.

A spec is a plain mapping (from ``farmctl enqueue``, the config's recurring jobs
or a test) checked by :func:`parse_spec` into the pydantic model of its
``kind``; the kinds, their models and everything else about them are listed in
one table, :data:`farm.kinds.KINDS`, which the queue reads through
:mod:`farm.queue.catalog` (the kinds sit above the queue)::

    {"kind": "gemm", "params": {"n": 1024, "dtype": "float32", "bn": 32, "target": "cpu"},
     "devices": {"abi": "arm64-v8a", "count": 1}, "priority": 5, "attempts": 3}

This module holds what every kind shares: :class:`JobBase` (devices, priority,
attempts, timeout, not_before, repetitions), :class:`DeviceSelection`, the
bounds every number is held to (:data:`MAX_PHONES` ...) and the building blocks
the kinds' models use (:class:`Strict`, :class:`FieldError`, :data:`Text`).

A bad spec raises :class:`farm.errors.SpecError` whose ``field`` is the dotted
path of the first offending field (``"params.n"``, ``"devices.count"``), and
nothing else, whatever JSON-like data it is given. Unknown fields are refused
too: a typo such as ``"prority"`` must not silently fall back to a default.
A reason that mentions another field writes it ``name=value`` (``block size 12
does not divide n=512``), so ``farmctl enqueue`` can rewrite it in its flags.

Bounds: every number is limited to what can run and be stored, so a spec that
passes can be written to SQLite and PostgreSQL as JSON (no NaN, no Infinity, no
NUL character) and its times added to without overflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from farm.config import JobSettings
from farm.errors import SpecError

if TYPE_CHECKING:
    from farm.queue.catalog import KindEntry

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_PHONES",
    "MAX_PRIORITY",
    "MAX_REPETITIONS",
    "MAX_TEXT_CHARS",
    "MAX_TIMEOUT_S",
    "NOT_BEFORE_MAX",
    "NOT_BEFORE_MIN",
    "DeviceSelection",
    "FieldError",
    "JobBase",
    "JobSpec",
    "Strict",
    "Text",
    "parse_spec",
]

# --- bounds: one place for every limit a spec is held to --------------------------------

#: Phones one job may hold at once (``devices.count``, a tune job's ``params.phones``):
#: more than a host's adb server and tracker serve well, far more than a fleet has.
MAX_PHONES = 256
#: One attempt's time limit at most: a week; past that a run is stuck, not slow.
MAX_TIMEOUT_S = 7 * 24 * 3600.0
#: Attempts per job at most, the first included.
MAX_ATTEMPTS = 100
#: ``priority`` lies in ``-MAX_PRIORITY..MAX_PRIORITY``.
MAX_PRIORITY = 1000
#: Measured runs per phone at most (``repetitions``), each thermally gated.
MAX_REPETITIONS = 1000
#: Characters in a serial, ABI, SoC or GPU name, a path or an input name.
MAX_TEXT_CHARS = 4096
#: ``not_before`` lies in this range (UTC): the databases and the scheduler's
#: arithmetic (``not_before`` plus backoffs and timeouts) hold it with room to spare,
#: while years 1 and 9999 overflow ``datetime`` as soon as an offset is added.
NOT_BEFORE_MIN = datetime(1970, 1, 1, tzinfo=UTC)
NOT_BEFORE_MAX = datetime(3000, 1, 1, tzinfo=UTC)


def _printable(value: str) -> str:
    """Refuse control characters: PostgreSQL's JSON cannot hold NUL, and logs show the rest."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("must not contain control characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid text (a lone surrogate)") from None
    return value


#: A bounded, printable string (empty allowed, as rows stored before the bounds may hold it).
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS), AfterValidator(_printable)]


class Strict(BaseModel):
    """Frozen, refuses unknown fields and non-finite floats (JSON has neither NaN nor Infinity)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FieldError(ValueError):
    """Raised inside a model validator to blame a field below the model.

    Attributes:
        field: the field's name relative to the model, e.g. ``"bn"``.
        reason: what is wrong, one sentence; other fields written ``name=value``.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(reason)


class DeviceSelection(Strict):
    """Which phones may run the job, and how many it needs at once.

    Every attribute given must match (they are ANDed); ``serials`` limits the
    candidates to those phones. Attributes are matched against the device facts
    the fleet records (see :func:`farm.queue.scheduler.matches`).
    ``prefer_serials`` limits nothing: of the matching free phones the scheduler
    tries those first (a follow-up job, ``model --tuned N``, on the phones tune
    job N ran on, so that the two compare phone by phone), then any other.
    """

    serials: list[Text] | None = Field(default=None, min_length=1, max_length=MAX_PHONES)
    prefer_serials: list[Text] | None = Field(default=None, min_length=1,
                                              max_length=MAX_PHONES)
    abi: Text | None = None  # e.g. "arm64-v8a", one of ro.product.cpu.abilist
    soc: Text | None = None  # e.g. "SM8150", ro.soc.model, case-insensitive
    sdk_min: int | None = Field(default=None, ge=1, le=1000)  # ro.build.version.sdk at least
    gpu: Text | None = None  # substring of the GPU renderer, e.g. "adreno"
    # The device kind (farm.controllers registry: "android", "board", "gpu");
    # None: any kind whose devices have what the job kind needs.
    kind: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]{0,15}$")
    count: int = Field(default=1, ge=1, le=MAX_PHONES)

    @model_validator(mode="after")
    def _enough_serials(self) -> DeviceSelection:
        if self.serials is not None:
            if len(set(self.serials)) != len(self.serials):
                raise FieldError("serials", "lists a serial twice")
            if self.count > len(self.serials):
                raise FieldError(
                    "count", f"needs {self.count} phones, serials lists {len(self.serials)}"
                )
        return self


def _default_attempts() -> int:
    return JobSettings().default_attempts


class JobBase(Strict):
    """Fields every kind shares; each kind's model adds ``kind`` and ``params``."""

    kind: str
    devices: DeviceSelection = DeviceSelection()
    priority: int = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    attempts: int = Field(default_factory=_default_attempts, ge=1, le=MAX_ATTEMPTS)
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)  # None: kind's default
    not_before: datetime | None = None  # naive means UTC
    repetitions: int = Field(default=1, ge=1, le=MAX_REPETITIONS)

    @field_validator("not_before")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        try:
            utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        except OverflowError:  # year 1 or 9999 pushed past datetime's range by its offset
            utc = None
        if utc is None or not NOT_BEFORE_MIN <= utc < NOT_BEFORE_MAX:
            raise ValueError(
                f"must lie between {NOT_BEFORE_MIN:%Y-%m-%d} and {NOT_BEFORE_MAX:%Y-%m-%d} (UTC)"
            )
        return utc

    @property
    def phones_needed(self) -> int:
        """How many phones the job holds at once."""
        return self.devices.count

    def timeout_for(self, jobs: JobSettings) -> float:
        """The time limit of one attempt in seconds: ``timeout_s``, else the kind's default."""
        from farm.queue.catalog import entry  # the catalog's types import this module

        return self.timeout_s if self.timeout_s is not None else entry(self.kind).timeout_s(jobs)

    @property
    def effective_timeout_s(self) -> float:
        """The time limit of one attempt in seconds, with the config's default settings."""
        return self.timeout_for(JobSettings())

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON-ready data, defaults filled in, for storage."""
        return self.model_dump(mode="json")


#: Any kind's validated spec (the registry is open, so this is the common base).
JobSpec = JobBase


def parse_spec(raw: Mapping[str, Any]) -> JobSpec:
    """Validate a job spec.

    Args:
        raw: the spec as plain data (JSON types; ``not_before`` may be an ISO
            8601 string or a datetime). Any other data is refused, not crashed on.

    Returns:
        The validated spec of its kind's model, defaults filled in, frozen.

    Raises:
        SpecError: the first bad field, named by its dotted path; for a kind this
            farm does not know, ``kind``.
    """
    if not isinstance(raw, Mapping):
        raise SpecError("spec", f"must be a mapping, not {type(raw).__name__}")
    kind = _kind(raw.get("kind"))
    try:
        return kind.spec.model_validate(dict(raw))
    except ValidationError as exc:
        raise _spec_error(exc) from exc
    except (OverflowError, RecursionError, TypeError) as exc:
        # Defence in depth: pydantic wraps only ValueError and AssertionError of a
        # validator; whatever else escapes one is still a spec farm cannot read.
        raise SpecError("spec", f"cannot be read: {exc}") from exc


def _kind(name: object) -> KindEntry:
    """The registry's entry for ``name``.

    Raises:
        SpecError: ``kind`` is missing, not a string, or not a kind this farm knows.
    """
    from farm.queue.catalog import entry  # the catalog's types import this module

    if name is None:
        raise SpecError("kind", "Field required")
    if not isinstance(name, str):
        raise SpecError("kind", f"must be a string naming a job kind, not {type(name).__name__}")
    return entry(name)


def _spec_error(exc: ValidationError) -> SpecError:
    """Map pydantic's first error to a SpecError naming the field."""
    error = exc.errors()[0]
    location = [str(part) for part in error["loc"]]
    reason = error["msg"]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        location.append(cause.field)
        reason = cause.reason
    elif reason.startswith("Value error, "):
        reason = reason.removeprefix("Value error, ")
    return SpecError(".".join(location) or "spec", reason)

