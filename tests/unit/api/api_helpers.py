"""What the API's tests share: the start time and the :class:`Api` handle."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from farm.clock import FakeClock
from farm.queue import Store

T0 = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


@dataclass
class Api:
    """A test client, the store behind it, the woken count and one token per role."""

    client: TestClient
    store: Store
    clock: FakeClock
    wakes: list[int]
    alice: str
    bob: str
    operator: str

    def auth(self, token: str) -> dict[str, str]:
        """The header that sends ``token``."""
        return {"Authorization": f"Bearer {token}"}


def flat_routes(routes: list[Any]) -> list[Any]:
    """Routes, with those of included routers listed (FastAPI 0.16x keeps them apart)."""
    out = []
    for route in routes:
        effective = getattr(route, "effective_route_contexts", None)
        out += flat_routes(list(effective())) if effective is not None else [route]
    return out
