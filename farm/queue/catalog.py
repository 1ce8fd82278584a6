"""The job kinds as the queue sees them: the few things it asks of a kind, and their table.

The queue validates a spec by its kind's model (:func:`farm.queue.spec.parse_spec`),
takes a kind's default time limit (:meth:`~farm.queue.spec.JobBase.timeout_for`) and
reads what a job needs of a device (:func:`farm.queue.capabilities.requirements`).
The kinds themselves (:mod:`farm.kinds`) sit above the queue: they build on its spec
models and its store. So the queue names here only what it calls (:class:`KindEntry`),
and :mod:`farm.kinds` installs its table (:data:`farm.kinds.KINDS`) when it is
imported: a dependency turned around, not hidden (docs/architecture.md, "Floors").

Every process that reads specs imports :mod:`farm.kinds` first: farmd (its
dispatcher), the attempt child and its zygote, the API, farmctl's commands that
open the database (:attr:`farm.cli.state.CliState.store`), :mod:`farm.client`,
:mod:`farm.testing` and the tests (``tests/conftest.py``). One that does not gets a
:class:`RuntimeError` saying so, never a spec wrongly refused or needs wrongly read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from farm.errors import SpecError

if TYPE_CHECKING:
    from farm.config import JobSettings
    from farm.queue.capabilities import Requirements
    from farm.queue.spec import JobBase

__all__ = ["KindEntry", "declared", "entry", "install"]


class KindEntry(Protocol):
    """What the queue asks of a job kind (:class:`farm.kinds.base.Kind` is one)."""

    @property
    def spec(self) -> type[JobBase]:
        """Its pydantic model, a :class:`~farm.queue.spec.JobBase`."""
        ...

    @property
    def timeout_s(self) -> Callable[[JobSettings], float]:
        """The default time limit of one attempt, seconds, from the config's ``[jobs]``."""
        ...

    @property
    def needs(self) -> Callable[[Mapping[str, Any]], Requirements]:
        """A stored spec (JSON) -> what each of its devices must have; total on any JSON."""
        ...


_table: Mapping[str, KindEntry] = MappingProxyType({})


def install(table: Mapping[str, KindEntry]) -> None:
    """Make ``table`` the kinds the queue knows, by name (:mod:`farm.kinds` does, once)."""
    global _table  # noqa: PLW0603 - the one table, set by farm.kinds' import
    _table = MappingProxyType(dict(table))


def _installed() -> Mapping[str, KindEntry]:
    """The installed table.

    Raises:
        RuntimeError: nothing installed it: the process never imported farm.kinds.
    """
    if not _table:
        raise RuntimeError("no job kinds installed in farm.queue.catalog: import farm.kinds "
                           "before reading job specs")
    return _table


def declared(name: str) -> KindEntry | None:
    """The kind called ``name``; None for one this farm does not know (a newer farmd's row)."""
    return _installed().get(name)


def entry(name: str) -> KindEntry:
    """The kind called ``name``.

    Raises:
        SpecError: no such kind (field ``kind``).
    """
    table = _installed()
    if name not in table:
        shown = repr(name) if len(name) <= 80 else repr(name[:77]) + "..."
        raise SpecError("kind", f"unknown job kind {shown}; this farm knows {', '.join(table)}")
    return table[name]
