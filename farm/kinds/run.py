"""Run a claimed job: its kind's runner (:data:`farm.kinds.KINDS`) and what runners share.

:func:`execute` validates the stored spec and calls its kind's ``run``; each
kind maps its spec to the jobs' plain parameters (``farm.jobs.params``) in its
own module. The helpers here serve every kind (benchmark kinds' measured runs
are in :mod:`farm.kinds.measure`): :func:`tracker_params` and
:func:`phone_target` say where a phone's session comes from and what it
compiles for. A kind whose devices must share one target (a tune) asks each
for its own and checks that they agree (:func:`farm.jobs.targets.shared_target`);
every device times its own runs, so every sample keeps its serial.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.config import Settings
from farm.jobs import params as jp
from farm.jobs.cache import CompileCache
from farm.jobs.targets import device_facts
from farm.kinds import kind_of
from farm.queue.records import AttemptView, JobView, Outcome, SnapshotData
from farm.queue.spec import parse_spec

if TYPE_CHECKING:
    from farm.controllers.base import DeviceController
    from farm.queue.store import Store

__all__ = [
    "RunContext",
    "device_facts",
    "execute",
    "phone_target",
    "tracker_params",
]

COMPILE_CACHE_DIR = "compile-cache"
SESSION_TIMEOUT_MIN_S = 60


@dataclass(frozen=True)
class RunContext:
    """Everything one attempt needs.

    Attributes:
        settings: farm's settings (tracker address, data folder).
        job: the claimed job.
        attempt: its running attempt; ``attempt.serials`` are the phones.
        facts: each phone's facts as the store keeps them, by serial.
        gate: waits until a phone is cool and returns its snapshot; called
            before every measured run.
        store: the queue, for the job's inputs (model blobs,
            :func:`farm.jobs.model_store.materialise`), the fleet's tuning
            records (:mod:`farm.tuning.fleet_records`) and the keys its devices
            serve (:mod:`farm.kinds.serve_keys`); None reads only this host's
            cache and tunes without the fleet's records.
        kinds: each device's kind (:mod:`farm.controllers`), by serial;
            ``android`` where not given.
        app_memory: the peak resident memory (KiB) of the process serving a
            device's RPC session, read while it is open
            (:class:`farm.runner.app_memory.AppMemory`); None where unknown.
    """

    settings: Settings
    job: JobView
    attempt: AttemptView
    facts: Mapping[str, Mapping[str, Any]]
    gate: Callable[[str], SnapshotData]
    store: Store | None = None
    kinds: Mapping[str, str] = field(default_factory=dict)
    app_memory: Callable[[str], int | None] = field(default=lambda _serial: None)

    @property
    def cache(self) -> CompileCache:
        """The compile cache shared by every attempt of this host."""
        return CompileCache(Path(self.settings.data_dir) / COMPILE_CACHE_DIR)


def device_controller(ctx: RunContext, serial: str) -> DeviceController:
    """The controller of ``serial``'s kind, made from the settings alone (it connects lazily).

    Raises:
        ConfigError: its kind is not registered here.
    """
    from farm.controllers import ANDROID, ControllerContext, controller_for

    return controller_for(ctx.kinds.get(serial, ANDROID), ControllerContext(ctx.settings))


def tracker_params(ctx: RunContext, serial: str, key: str | None = None) -> jp.TrackerParams:
    """Where a session to ``serial`` comes from: its kind's tracker key for it, or ``key``.

    Raises:
        ConfigError: its kind is not registered here.
    """
    tracker = ctx.settings.tracker
    return jp.TrackerParams(
        host=tracker.host,
        port=tracker.port,
        key=key or device_controller(ctx, serial).tracker_key(serial),
        session_timeout_s=max(SESSION_TIMEOUT_MIN_S, int(ctx.job.timeout_s)),
        serial=serial,
    )


def phone_target(serial: str, ctx: RunContext, device: jp.DeviceKind) -> dict[str, Any]:
    """The TVM target of ``device`` on ``serial``, from its facts, by its kind's controller.

    Raises:
        SpecError: the device lacks that processor; PhoneFault: its facts were
            never read; ToolMissing: its linker is not installed; ConfigError:
            its kind is not registered here.
    """
    facts = {"serial": serial, **ctx.facts.get(serial, {})}
    return device_controller(ctx, serial).compile_target(facts, device.value).target


def execute(ctx: RunContext) -> Outcome:
    """Run the claimed job on its phones and return what it produced.

    Raises:
        UserFault: the spec cannot run (SpecError, also for a kind this farm
            does not know; CompileError, ToolMissing).
        PhoneFault: a phone, its app or the session failed (SessionError ...),
            or a phone stayed too hot.
        InfraFault: the tracker is unreachable.
    """
    spec = parse_spec(ctx.job.spec)
    return kind_of(spec.kind).run(ctx, spec)
