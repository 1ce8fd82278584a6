"""The settings of the TVM RPC tracker farm runs and the shared keys its pool offers."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from farm.config.base import Frozen


class TrackerSettings(Frozen):
    """The TVM RPC tracker.

    Attributes:
        external: use a tracker someone else runs at host:port instead of
            starting ``tvm.exec.rpc_tracker``.
        host: the address the tracker binds to (or the external one's address).
        port: the tracker's port (9190 is TVM's default).
        phone_host: the address phones use to reach this host in lan mode
            (``10.0.2.2`` for the virtual fleet); None means ``host``.
        key: the prefix of the tracker keys phones register under
            (``<key>-<serial>``, see :mod:`farm.tvm.keys`).
        network: how phones reach the tracker. ``usb-only`` (default): through
            ``adb reverse`` and a relay per phone, which works on any network
            and with several phones per host; ``lan``: directly at
            ``phone_host:port``.
        device_port: the tracker's port as usb-only phones see it (the
            reversed port on the phone); None means ``port``.
        advertise_host: the tracker's address as people and other hosts reach
            it (stored in this host's ``hosts`` row, shown for reservations);
            None means ``host``. Set it when ``host`` is a wildcard (``0.0.0.0``)
            or loopback and several hosts share one database.
    """

    external: bool = False
    host: str = "127.0.0.1"
    port: int = Field(9190, gt=0, lt=65536)
    phone_host: str | None = None
    key: str = Field("android", min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    network: Literal["usb-only", "lan"] = "usb-only"
    device_port: int | None = Field(None, gt=0, lt=65536)
    advertise_host: str | None = Field(None, min_length=1)

    @property
    def advertised_host(self) -> str:
        """The tracker's address as users reach it: ``advertise_host``, else ``host``."""
        return self.advertise_host or self.host


class PoolSelection(Frozen):
    """The phones one ``pool.keys`` entry offers; every attribute given must match."""

    abi: str | None = None  # e.g. "arm64-v8a", one of ro.product.cpu.abilist
    soc: str | None = None  # e.g. "SM8150", case-insensitive
    gpu: str | None = None  # substring of the GPU renderer, e.g. "adreno"
    sdk_min: int | None = Field(None, ge=1)


class PoolSettings(Frozen):
    """A shared tracker key under which idle phones also serve stock scripts.

    A script written for the stock workflow, ``connect_tracker(host,
    port).request(key)``, gets a free phone (:mod:`farm.fleet.pool`). Only
    usb-only phones (``tracker.network``) are pooled: farm learns the app's
    registration from their relay.

    Attributes:
        key: the shared key every idle phone serves, e.g. ``android``; None
            (default) and no ``keys``: no pool. It may equal ``tracker.key``:
            farm itself only requests ``<tracker.key>-<serial>`` and
            ``<tracker.key>-job-<id>``, so no pool key may start with
            ``<tracker.key>-``.
        keys: more shared keys, each served by the idle phones its selection
            matches, e.g. ``{"arm64" = {abi = "arm64-v8a"}, "sm8150" = {soc =
            "SM8150"}}``.
        interval_s: how often farm offers newly idle phones and withdraws
            busy, reserved or unhealthy ones.
    """

    key: str | None = Field(None, min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    keys: dict[Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9-]+$")],
               PoolSelection] = Field(default_factory=dict)
    interval_s: float = Field(1.0, gt=0)
