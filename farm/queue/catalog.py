"""The job kinds as the queue sees them: the few things it asks of a kind, and their table.

The queue validates a spec by its kind's model (:func:`farm.queue.spec.parse_spec`),
takes a kind's default time limit (:meth:`~farm.queue.spec.JobBase.timeout_for`) and
reads what a job needs of a device (:func:`farm.queue.capabilities.requirements`).
The kinds themselves (:mod:`farm.kinds`) sit above the queue: they build on its spec
models and its store. So the queue names here only what it calls (:class:`KindEntry`),
and the composition root installs the kinds' table (:data:`farm.kinds.KINDS`) here:
a dependency turned around, not hidden (docs/architecture.md, "Composition root").

Every process that reads specs calls :func:`farm.composition.install` first: farmd,
farmctl, the attempt child, :mod:`farm.client`, :mod:`farm.testing`'s harness, the
tests (``tests/conftest.py``) and any script that opens a Store itself. One that does
not gets a :class:`RuntimeError` saying so, never a spec wrongly refused or needs
wrongly read.
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
_load: Callable[[], Mapping[str, KindEntry]] | None = None


def install(load: Callable[[], Mapping[str, KindEntry]]) -> None:
    """Name where the kinds the queue knows come from (:func:`farm.composition.install`).

    Args:
        load: returns the kinds by name; called once, when a spec is first read,
            so a process that reads none never imports the kinds.
    """
    global _table, _load  # the one table, set by the composition root
    _table, _load = MappingProxyType({}), load


def _installed() -> Mapping[str, KindEntry]:
    """The installed table, loaded on first use.

    Raises:
        RuntimeError: nothing installed it: the process never called
            farm.composition.install().
    """
    global _table  # noqa: PLW0603 - loaded once, on first use
    if not _table:
        if _load is None:
            raise RuntimeError("no job kinds installed in farm.queue.catalog: call "
                               "farm.composition.install() once before reading job specs")
        _table = MappingProxyType(dict(_load()))
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
