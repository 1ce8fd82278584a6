"""``/api/v1/devices``: the phones, one phone, and an operator's drain, undrain and release."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from farm.api.bounds import ReasonQuery, SerialPath
from farm.api.routes import ServiceDep
from farm.api.schemas import DeviceDetailOut, DeviceOut, device_out
from farm.api.service import FarmService
from farm.queue.reservations import ReservationView

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/devices", tags=["devices"])


def _reservations(svc: FarmService) -> dict[str, ReservationView]:
    """The reservations in force, by serial."""
    return {r.serial: r for r in svc.reservations()}


@router.get("")
def list_devices(svc: ServiceDep) -> list[DeviceOut]:
    """Every phone: state, health and why, host (reachable?), kind, facts, readings, its job."""
    jobs = svc.running_jobs()
    reserved = _reservations(svc)
    dead = svc.dead_hosts()
    return [device_out(r, jobs.get(r.attempt_id or 0), reserved.get(r.serial), dead)
            for r in svc.devices()]


@router.get("/{serial:path}")
def get_device(svc: ServiceDep, serial: SerialPath,
               events: Annotated[int, Query(ge=0, le=1000)] = 50) -> DeviceDetailOut:
    """One phone, with its newest ``events`` state changes and recovery steps."""
    record = svc.device(serial)
    job_id = svc.running_jobs().get(record.attempt_id or 0)
    out = device_out(record, job_id, _reservations(svc).get(serial), svc.dead_hosts())
    return DeviceDetailOut(**out.model_dump(), events=svc.device_events(serial, events))


@router.post("/{serial:path}/drain")
def drain(svc: ServiceDep, serial: SerialPath,
          reason: ReasonQuery = "drained by operator") -> dict[str, Any]:
    """Let a phone finish its attempt, then give it no more work (operator token)."""
    return {"serial": serial, "changed": svc.set_drained(serial, True, reason)}


@router.post("/{serial:path}/undrain")
def undrain(svc: ServiceDep, serial: SerialPath,
            reason: ReasonQuery = "undrained by operator") -> dict[str, Any]:
    """Let a drained phone take work again (operator token)."""
    return {"serial": serial, "changed": svc.set_drained(serial, False, reason)}


@router.post("/{serial:path}/release")
def release(svc: ServiceDep, serial: SerialPath) -> dict[str, Any]:
    """Release a quarantined phone: it is set up and checked again (operator token)."""
    svc.release(serial)
    return {"serial": serial, "released": True}
