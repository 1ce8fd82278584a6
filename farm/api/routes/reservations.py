"""``/api/v1/reservations``: take a phone out of scheduling for a person, end it, list them."""

from __future__ import annotations

from fastapi import APIRouter, status

from farm.api.bounds import SerialPath
from farm.api.routes import ServiceDep
from farm.api.schemas import ReserveIn
from farm.queue.reservations import ReservationView
from farm.queue.spec import DeviceSelection

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/reservations", tags=["reservations"])


@router.get("")
def list_reservations(svc: ServiceDep, ended_too: bool = False) -> list[ReservationView]:
    """The reservations in force now, by serial; ``ended_too``: every one ever made."""
    return svc.reservations(ended_too=ended_too)


@router.post("", status_code=status.HTTP_201_CREATED)
def reserve(svc: ServiceDep, body: ReserveIn) -> ReservationView:
    """Reserve a phone (by serial, or a free one matching the selection) for the caller.

    The answer says where to reach it: ``tvm.rpc.connect_tracker(tracker_host,
    tracker_port).request(tracker_key)``.
    """
    selection = None
    if body.serial is None:
        selection = DeviceSelection(abi=body.abi, soc=body.soc, gpu=body.gpu,
                                    sdk_min=body.sdk_min)
    return svc.reserve(body.serial, body.for_s, selection=selection)


@router.delete("/{serial:path}")
def unreserve(svc: ServiceDep, serial: SerialPath) -> ReservationView:
    """End a reservation: the caller's own, or any with an operator token (else 403)."""
    return svc.unreserve(serial)
