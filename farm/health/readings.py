"""Readings a device kind declares: name, unit, and what gates a job on it.

A kind's health sweep yields ``{name: value}`` (a number; None where the probe
could not read it). What each name means, its unit and whether it keeps a job
off the device is written once per kind, as a :class:`Declared` set of
:class:`Reading` values (Android's, boards' and GPUs' are in
:mod:`farm.health.kind_readings`, which :func:`farm.composition.install` hands
to :func:`install`; :func:`declare` adds or replaces one kind's). Everything
else reads the declaration:

- the verdict (:func:`farm.health.verdict.verdict`) judges every reading that
  has a :class:`Limit` against its threshold from the config;
- the store keeps the values as one JSON column (``health_samples.readings``);
- ``farmctl devices``/``device``, the API and the dashboard show the readings
  the kind declares, with units (:func:`shown`); those marked ``own_key`` also
  under their own name (:func:`own_key_readings`);
- the thermal gate's snapshot keeps every reading before each measured run,
  and results rows, the report, spreads and plots show those marked
  ``with_results`` beside each figure (:func:`result_readings`);
- the metrics endpoint publishes every reading as ``farm_device_reading`` and
  those with a ``series`` as a gauge of their own (:func:`all_declared`).

So a new reading is one :class:`Reading` in its kind's declaration. A stored
name this farm does not declare (a row a newer farm wrote) is still shown, by
name and without a unit: farm's names carry their unit (``_c``, ``_pct``, ``_mb``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Literal, TypeVar

__all__ = [
    "UNKNOWN_READING",
    "Condition",
    "Declared",
    "Limit",
    "Reading",
    "ReadingValues",
    "all_declared",
    "declare",
    "declared",
    "install",
    "own_key_readings",
    "own_keys",
    "resolve_setting",
    "result_readings",
    "shown",
]

#: One sample's readings by name; None where the probe could not read one.
ReadingValues = Mapping[str, float | None]

_Raw = TypeVar("_Raw")


class Condition(str, Enum):
    """What one sample says about a device, worst last (the order the verdict ranks by).

    Not the device's health: :class:`farm.queue.models.DeviceHealth` (``good``,
    ``bad``, ``unknown``, LAVA's axis) is stored per device and derived from
    conditions by :func:`farm.fleet.lifecycle.health_of`; a condition decides the
    device's next state (``cooling`` only needs time, ``unhealthy`` needs fixing).
    """

    GOOD = "good"
    COOLING = "cooling"
    UNHEALTHY = "unhealthy"
    OFFLINE = "offline"


@dataclass(frozen=True)
class Limit:
    """When a reading keeps a job off its device.

    Attributes:
        bound: ``"max"``: a value above the threshold breaks the limit;
            ``"min"``: a value below it does.
        condition: what a broken limit means: ``COOLING`` (the device only
            needs time; thermal gating waits it out) or ``UNHEALTHY``.
        setting: where the threshold is configured, a dotted path into farm's
            settings: ``"health.battery_temp_max_c"``, ``"gpu.temp_max_c"``,
            ``"health.reading_limits.load_1m"`` (a ``[health.reading_limits]``
            entry: a reading's threshold with no setting of its own). A setting
            that is None or absent disables the limit.
        value: a fixed threshold where ``setting`` is None (a definition, not a
            preference: "any heat throttle reason" is a maximum of 0).
        margin: whether the hysteresis margin (``health.cool_margin_c``) lowers
            the threshold when a cooling device asks to come back; for
            temperatures in °C.
    """

    bound: Literal["max", "min"]
    condition: Condition
    setting: str | None = None
    value: float | None = None
    margin: bool = False

    def broken(self, value: float, threshold: float) -> bool:
        """Whether ``value`` breaks this limit at ``threshold``."""
        return value > threshold if self.bound == "max" else value < threshold

    @property
    def op(self) -> str:
        """The comparison a broken limit shows in a reason: ``>`` or ``<``."""
        return ">" if self.bound == "max" else "<"


@dataclass(frozen=True)
class Reading:
    """One reading a kind declares.

    Attributes:
        name: its key in samples, storage and the API, with its unit in the
            name (``max_zone_temp_c``, ``free_storage_mb``).
        unit: the unit as shown (``"°C"``, ``"%"``, ``"MiB"``; ``""`` for a count
            or a level).
        description: one line for people (the CLI's ``device`` view, the
            dashboard's tooltip), with the source of the value.
        read: takes the kind's parsed probe output (the kind's raw type) to
            the value; None where the probe could not read it.
        limit: when it keeps a job off the device; None: shown, never gating.
        label: a few words for people beside the value and its unit (the
            dashboard's ``battery temp 31.5 °C``); ``""``: the name with spaces
            (:attr:`shown_label`).
        with_results: kept beside each measured figure (results rows and their
            CSV column, the report's table and plot, spreads): the state that
            tells one figure from the next.
        own_key: also a key of its own in device listings and the API's device
            rows, beside ``readings`` (scripts read it from before readings
            were declared per kind).
        series: the name of a Prometheus gauge ``{serial}`` of its own, beside
            ``farm_device_reading``; ``""``: none.
        levels: names of the values 0, 1, ... of a level (a thermal status):
            shown as ``3 (severe)``; empty for a quantity.
    """

    name: str
    unit: str
    description: str
    read: Callable[[Any], float | None]
    limit: Limit | None = None
    label: str = ""
    with_results: bool = False
    own_key: bool = False
    series: str = ""
    levels: tuple[str, ...] = ()

    @property
    def shown_label(self) -> str:
        """:attr:`label`, or the name with its underscores as spaces where none is given."""
        return self.label or _label_of(self.name)

    @property
    def heading(self) -> str:
        """A table column's heading: the label with its unit (``battery temp °C``)."""
        return f"{self.shown_label} {self.unit}" if self.unit else self.shown_label

    def text(self, value: float | None) -> str:
        """``value`` for a table cell: ``31.5``, or ``-`` when unknown.

        A level shows its name: ``3 (severe)``; ``9 (?)`` past its names.
        """
        if value is None:
            return "-"
        if self.levels:
            level = int(value)
            name = self.levels[level] if 0 <= level < len(self.levels) else "?"
            return f"{level} ({name})"
        return f"{value:.1f}"


@dataclass(frozen=True)
class Declared(Generic[_Raw]):
    """The readings of one device kind, in the order they are shown.

    Attributes:
        kind: the ``devices.kind`` value (``android``, ``board``, ``gpu``).
        readings: its readings; names unique.
    """

    kind: str
    readings: tuple[Reading, ...]

    def __post_init__(self) -> None:
        names = [reading.name for reading in self.readings]
        if len(set(names)) != len(names):
            raise ValueError(f"the {self.kind} readings name one reading twice: {names}")

    def read(self, raw: _Raw) -> dict[str, float | None]:
        """Every declared reading's value from the kind's parsed probe output."""
        return {reading.name: reading.read(raw) for reading in self.readings}

    def get(self, name: str) -> Reading | None:
        """The declared reading called ``name``, or None."""
        return next((r for r in self.readings if r.name == name), None)

    def plus(self, *more: Reading) -> Declared[_Raw]:
        """These readings and ``more`` (a kind's declaration with one more reading)."""
        return Declared(self.kind, (*self.readings, *more))


_REGISTRY: dict[str, Declared[Any]] = {}


def install(declarations: Iterable[Declared[Any]]) -> None:
    """Make ``declarations`` the readings of their kinds (:func:`farm.composition.install`)."""
    _REGISTRY.update({readings.kind: readings for readings in declarations})


def declare(readings: Declared[Any]) -> Declared[Any]:
    """Register (or replace) the readings of a kind; returns what it replaced, or an empty set."""
    before = _REGISTRY.get(readings.kind, Declared(readings.kind, ()))
    _REGISTRY[readings.kind] = readings
    return before


#: The description of a stored reading this farm does not declare for the device's kind.
UNKNOWN_READING = "unknown to this farm (written by a newer farm sharing the database)"


def declared(kind: str) -> Declared[Any]:
    """The readings of ``kind``; an empty set for a kind that declares none (``proxy``).

    Raises:
        RuntimeError: nothing declared any kind: the process never called
            :func:`farm.composition.install`, so a verdict would judge no reading.
    """
    return _registry().get(kind) or Declared(kind, ())


def all_declared() -> tuple[Declared[Any], ...]:
    """Every kind's readings, in the order the kinds were declared."""
    return tuple(_registry().values())


def result_readings() -> tuple[Reading, ...]:
    """The readings kept beside each measured figure (``with_results``), of every kind.

    In declaration order, kind by kind; a name two kinds declare is listed once
    (its first declaration). Read on each call, so a kind declared later counts.
    """
    return _unique(r for d in all_declared() for r in d.readings if r.with_results)


def own_key_readings() -> tuple[Reading, ...]:
    """The readings that are also a key of their own in device rows (``own_key``), once each."""
    return _unique(r for d in all_declared() for r in d.readings if r.own_key)


def own_keys(values: ReadingValues) -> dict[str, float | None]:
    """The :func:`own_key_readings` of ``values``, each under its name; None where absent.

    A level's value is an int (a thermal status reads ``2``, not ``2.0``).
    """
    out: dict[str, float | None] = {}
    for reading in own_key_readings():
        value = values.get(reading.name)
        out[reading.name] = int(value) if reading.levels and value is not None else value
    return out


def _unique(readings: Iterable[Reading]) -> tuple[Reading, ...]:
    first: dict[str, Reading] = {}
    for reading in readings:
        first.setdefault(reading.name, reading)
    return tuple(first.values())


def _registry() -> dict[str, Declared[Any]]:
    if not _REGISTRY:
        raise RuntimeError("no device readings declared in farm.health.readings: call "
                           "farm.composition.install() once before reading health")
    return _REGISTRY


def resolve_setting(root: Any, path: str) -> float | None:
    """The number a dotted settings path names under ``root``; None where absent or unset.

    Args:
        root: farm's settings (pydantic models; tables are dicts).
        path: e.g. ``"gpu.temp_max_c"`` or ``"health.reading_limits.load_1m"``.
    """
    value: Any = root
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else getattr(value, part, None)
        if value is None:
            return None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _label_of(name: str) -> str:
    """A reading's name as words: ``fan_rpm`` -> ``fan rpm``."""
    return name.replace("_", " ")


def shown(kind: str, values: ReadingValues) -> list[dict[str, Any]]:
    """The readings of one sample as people see them: the kind's order, then unknown names.

    Args:
        kind: the device's kind.
        values: the stored readings (``health_samples.readings``).

    Returns:
        ``[{"name", "label", "value", "unit", "description", "gates", "known", "levels"}]``:
        each declared reading that has a value (``label``: :attr:`Reading.shown_label`;
        ``gates``: it has a limit that can keep a job off the device; ``levels``:
        :attr:`Reading.levels`, the names of a level's values), then each
        stored name the kind does not declare here (a newer farm's, or any of a
        device kind this farm does not know), labelled by its name and marked
        (``fan rpm (unknown)``), with unit ``""``, ``known`` false, no levels
        and a description saying so.
    """
    readings = declared(kind)
    rows = [{"name": r.name, "label": r.shown_label, "value": values[r.name], "unit": r.unit,
             "description": r.description, "gates": r.limit is not None, "known": True,
             "levels": list(r.levels)}
            for r in readings.readings if values.get(r.name) is not None]
    known = {r.name for r in readings.readings}
    rows += [{"name": name, "label": f"{_label_of(name)} (unknown)", "value": value,
              "unit": "", "description": UNKNOWN_READING, "gates": False, "known": False,
              "levels": []}
             for name, value in sorted(values.items()) if name not in known and value is not None]
    return rows
