"""The ``/api/v1/...`` routers, one module per resource, and the service each request gets.

Every route takes :data:`ServiceDep`: a :class:`~farm.api.service.FarmService`
for the request's caller, so no route runs without a valid token (401) and
each right is checked in one place, the service.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from farm.api.auth import CallerDep
from farm.api.context import ApiContext, context
from farm.api.service import FarmService

__all__ = ["ServiceDep", "service"]


def service(ctx: Annotated[ApiContext, Depends(context)], who: CallerDep) -> FarmService:
    """The queue as the request's caller sees it (a FastAPI dependency)."""
    return FarmService(ctx.store, ctx.settings, ctx.clock, caller=who, wake=ctx.wake)


ServiceDep = Annotated[FarmService, Depends(service)]
