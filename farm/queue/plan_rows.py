"""What the scheduler decides from and what it decides: plain, frozen rows.

:class:`QueueSnapshot` holds the queued jobs (:class:`QueuedJob`) and the known
phones (:class:`DeviceView`) as ``Store.snapshot()`` and ``Store.head()`` read
them; :func:`farm.queue.scheduler.plan` returns :class:`Assignment` rows, which
``Store.claim()`` applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from farm.queue.capabilities import ANY_PHONE, Requirements
from farm.queue.models import DeviceState
from farm.queue.spec import DeviceSelection

__all__ = ["IN_SERVICE", "Assignment", "DeviceView", "QueueSnapshot", "QueuedJob"]


#: States from which a phone comes back to ``ready`` by itself: a job that needs
#: such phones is worth holding free ones for.
IN_SERVICE = frozenset(
    {DeviceState.READY, DeviceState.BUSY, DeviceState.COOLING, DeviceState.PROVISIONING}
)


@dataclass(frozen=True)
class DeviceView:
    """A phone as the scheduler sees it.

    ``facts`` keys matched by :func:`matches`: ``abi`` (str), ``abis`` (list of
    str, ro.product.cpu.abilist), ``soc`` (str), ``sdk`` (int), ``gpu`` (str);
    by :mod:`farm.queue.capabilities`: ``has_opencl``, ``has_vulkan`` (bool),
    ``gpu_limits`` (per target, ``max_threads_per_block``), ``model`` and ``soc``.
    ``held_outside``: why a session farm did not open holds it (None: none does);
    such a phone gets no work until it is free. ``reserved_by`` and
    ``reserved_until``: the owner and end time of its open reservation (None:
    none); it gets no work while ``reserved_until`` is after the plan's ``now``.
    ``host``: the farmd host that runs it (:mod:`farm.queue.hosts`); None: no
    host claimed it yet.
    ``kind``: the device kind (``devices.kind``, a :mod:`farm.controllers`
    name), matched against ``DeviceSelection.kind``.
    """

    serial: str
    state: DeviceState
    drained: bool = False
    facts: Mapping[str, Any] = field(default_factory=dict)
    held_outside: str | None = None
    reserved_by: str | None = None
    reserved_until: datetime | None = None
    host: str | None = None
    kind: str = "android"

    def reserved(self, now: datetime) -> bool:
        """Whether a person's reservation keeps work off the phone at ``now``."""
        return self.reserved_until is not None and self.reserved_until > now


@dataclass(frozen=True)
class QueuedJob:
    """A queued job as the scheduler sees it; ``not_before``/``retry_at`` None mean now.

    ``needs`` is what its workload needs of a phone, from
    :func:`farm.queue.capabilities.requirements` (default: a CPU, any phone).
    """

    id: int
    kind: str
    priority: int
    submitted_at: datetime
    devices: DeviceSelection
    not_before: datetime | None = None
    excluded_serials: frozenset[str] = frozenset()
    retry_at: datetime | None = None
    needs: Requirements = ANY_PHONE


@dataclass(frozen=True)
class QueueSnapshot:
    """Everything :func:`plan` decides from: queued jobs and every known phone."""

    jobs: Sequence[QueuedJob]
    devices: Sequence[DeviceView]


@dataclass(frozen=True)
class Assignment:
    """Run job ``job_id`` on ``serials``, holding them by a lease of ``lease_s`` seconds."""

    job_id: int
    serials: tuple[str, ...]
    lease_s: float
