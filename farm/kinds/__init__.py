"""Job kinds: one module per kind, one table listing them.

::

    base.py     Kind: what a kind declares (spec model, runner, lease, timeout,
                enqueue command, report label)
    gemm.py     time a square matrix multiply on CPU or GPU
    model.py    time an ONNX model, checked against onnxruntime
    tune.py     MetaSchedule tuning of a gemm or an ONNX model across phones
                (tune_model.py: its model half, not a kind of its own)
    ab.py       two builds timed in turns on one phone until B is slower, faster
                or no change against A (ab_builds.py: what a side names)

Adding a kind is one module declaring its :class:`~farm.kinds.base.Kind` and
one line in :data:`KINDS`. Everything that depends on a kind goes through this
table: :func:`farm.queue.spec.parse_spec` (validation, through
:mod:`farm.queue.catalog`, where :func:`farm.composition.install` puts it), the dispatcher's
leases (:class:`LeaseByKind`), :func:`farm.kinds.run.execute` (the
runner), ``farmctl enqueue`` (the commands) and :mod:`farm.results.report` (labels).

A kind this farm does not know (a row written by a newer farmd into a shared
database) is not an error of the queue, nor of the job: it has no lease here
(:class:`LeaseByKind`), so this farm's scheduler never starts it and its host
never fails it; it stays queued for a host that knows it, and ``farmctl job``
says so (:func:`farm.queue.waiting.wait_reasons`). The queue goes on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

from farm.config import JobSettings
from farm.kinds import ab, gemm, model, tune
from farm.kinds.base import EnqueueCommand, Kind
from farm.queue import catalog

__all__ = ["KINDS", "EnqueueCommand", "Kind", "LeaseByKind", "kind_of"]

#: Every job kind this farm runs, by name; the order is the one ``farmctl`` lists.
KINDS: Mapping[str, Kind] = MappingProxyType({k.name: k for k in (
    gemm.KIND,
    model.KIND,
    tune.KIND,
    ab.KIND,
)})


def kind_of(name: str) -> Kind:
    """The kind called ``name``.

    Raises:
        SpecError: no such kind (field ``kind``).
    """
    catalog.entry(name)  # the one check and message for a kind this farm does not know
    return KINDS[name]


class LeaseByKind(Mapping[str, float]):
    """Lease seconds of each kind this farm knows, from the config's ``[jobs]``.

    Its keys are the kinds :func:`farm.queue.scheduler.plan` may start: a job of
    any other kind (a newer farm's) is not a key, so it is never started here and
    stays queued for a host that knows it.
    """

    def __init__(self, jobs: JobSettings) -> None:
        self._by_kind = {name: kind.lease_s(jobs) for name, kind in KINDS.items()}

    def __getitem__(self, name: str) -> float:
        return self._by_kind[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_kind)

    def __len__(self) -> int:
        return len(self._by_kind)

