"""A results row's readings as keys of their own, in its JSON, CSV and on the API's wire.

In Python a row (:class:`~farm.results.rows.SampleRow`,
:class:`~farm.results.spreads.PhoneSpread`) keeps the readings taken before
its runs as one mapping, ``readings``, so no field names a reading. Outside,
each reading is a column named as declared (``thermal_status``), where the
row's fields used to carry them: :class:`FlatReadings` gives a row
:meth:`~FlatReadings.flat`, :meth:`~FlatReadings.from_flat` and the pydantic
schema that the API's routes and ``farmctl --server`` read and write with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any, ClassVar, Self

from farm.health.readings import result_readings

__all__ = ["FlatReadings"]


class FlatReadings:
    """A dataclass row whose ``readings`` go flat after the field :attr:`READINGS_AFTER`.

    Attributes:
        READINGS_AFTER: the field the readings' columns follow (``unit``).
    """

    READINGS_AFTER: ClassVar[str]
    readings: Mapping[str, float | None]

    def flat(self) -> dict[str, Any]:
        """The row's fields with each reading a key of its own.

        The readings declared ``with_results`` (None where not read) come
        after :attr:`READINGS_AFTER`, then any other reading the row holds
        (a newer farm's).
        """
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]  # a dataclass, by the class's contract
            if f.name == "readings":
                continue
            out[f.name] = getattr(self, f.name)
            if f.name == self.READINGS_AFTER:
                out.update({r.name: self.readings.get(r.name) for r in result_readings()})
                out.update(self.readings)
        return out

    @classmethod
    def flat_fields(cls) -> list[str]:
        """The keys of :meth:`flat`, in order, for the readings this farm declares."""
        out: list[str] = []
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name != "readings":
                out.append(f.name)
            if f.name == cls.READINGS_AFTER:
                out += [r.name for r in result_readings()]
        return out

    @classmethod
    def from_flat(cls, data: Mapping[str, Any]) -> Self:
        """The row from its :meth:`flat` form: every key that is no field is a reading."""
        names = {f.name for f in fields(cls)} - {"readings"}  # type: ignore[arg-type]
        readings = {k: v for k, v in data.items() if k not in names and k != "readings"}
        return cls(**{k: v for k, v in data.items() if k in names},  # type: ignore[call-arg]
                   readings={**(data.get("readings") or {}), **readings})

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Validate from the flat form (:meth:`from_flat`), serialize to it (:meth:`flat`)."""
        from pydantic_core import core_schema

        def read(value: Any) -> Any:
            return cls.from_flat(value) if isinstance(value, Mapping) else value

        def write(row: FlatReadings) -> dict[str, Any]:
            return {k: v.isoformat() if isinstance(v, datetime) else v
                    for k, v in row.flat().items()}

        return core_schema.no_info_before_validator_function(
            read, handler(source),
            serialization=core_schema.plain_serializer_function_ser_schema(write))
