"""``/api/v1/hosts``: the farmd hosts sharing the database, alive or dead."""

from __future__ import annotations

from fastapi import APIRouter

from farm.api.routes import ServiceDep
from farm.api.schemas import HostOut

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/hosts", tags=["hosts"])


@router.get("")
def list_hosts(svc: ServiceDep) -> list[HostOut]:
    """Every host: its row (tracker address, heartbeat, start) and whether it is alive."""
    dead = svc.dead_hosts()
    return [HostOut(host=h, alive=h.host_id not in dead) for h in svc.hosts()]
