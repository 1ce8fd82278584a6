"""What every API route reads: the store, the settings, the clock, and how to wake farmd."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import Request

from farm.clock import Clock, SystemClock
from farm.config import Settings
from farm.queue.store import Store

__all__ = ["ApiContext", "context"]


@dataclass
class ApiContext:
    """The API's view of farm.

    Attributes:
        store: the queue database.
        settings: farm's settings.
        clock: the time source.
        wake: asks farmd's dispatcher for a tick (after an enqueue); None outside farmd.
    """

    store: Store
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)
    wake: Callable[[], None] | None = None


def context(request: Request) -> ApiContext:
    """The application's :class:`ApiContext` (a FastAPI dependency)."""
    ctx: ApiContext = request.app.state.farm
    return ctx
