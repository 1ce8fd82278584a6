"""The pool key: idle phones also serve stock scripts that ``request("android")``.

A script written for the stock workflow asks the tracker for one shared key
(``tvm.rpc.connect_tracker(host, port).request("android")``); farm's phones
register under their own keys (``<tracker.key>-<serial>``, :mod:`farm.tvm.keys`).
:class:`Pool` offers every idle phone under the configured ``pool.key`` as
well (and under each ``pool.keys`` entry whose selection it matches, e.g. a key
per ABI or SoC), and takes it back while a job holds it, a person reserved it,
it is unhealthy or in anyone's session.

How, in TVM's tracker (apache/tvm ``python/tvm/rpc/tracker.py``): a ``PUT
[key, [port, matchkey], host]`` appends one entry to ``key``'s queue and to
its connection's ``put_values``; a ``REQUEST`` pops the first entry and hands
the client ``[host, port, matchkey]``; when a connection closes, its entries
are removed, but only from the queue named by the *matchkey's* prefix
(``split_random_key(matchkey)``) and only if the connection sent
``UPDATE_INFO`` with a ``key``. Each pooled phone therefore gets:

- a **registrar**: its own tracker connection that sends ``UPDATE_INFO
  {"key": "pool:<key>"}`` (not ``server:``, so the tracker's summary does not
  list it as a server) and one ``PUT [pool key, [gate port, "<pool key>:<random>"],
  host]`` per pool key the phone matches. Closing it withdraws the phone: each
  matchkey's prefix is its pool key, so the tracker removes each entry from its
  key's queue. Two entries
  sharing the app's matchkey would not be removed this way, which is why the
  pool never reuses the app's matchkey in the tracker.
- a **gate**: a loopback listener the pool entry points at. A client
  presenting a matchkey the registrar issued is let through while the phone is
  still offered: the gate marks the phone held outside farm
  (:meth:`Store.mark_held_outside`, compare-and-set against a claim: a phone a
  job took since is refused), rewrites the client's key to the app's newest
  matchkey (:attr:`farm.tvm.relay.Relay.offer`) and splices the session to the
  app's forward. Any other client gets ``RPC_CODE_MISMATCH`` at once, and TVM's
  ``TrackerSession.request`` retries with the next entry (``max_retry=5``).
  When the session ends the mark is cleared and the dispatcher woken.

Only usb-only phones are pooled: the app's registration (port and matchkey) is
learnt from its relay. A farm job never meets a pool session on its phone: the
claim and the gate's mark are compare-and-set on the same row. A pool client
that took an entry in the instant before the phone's job claimed it is
refused at the gate and retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from farm.aio import LoopThread, splice
from farm.clock import Clock
from farm.config import PoolSettings
from farm.errors import TrackerUnreachable
from farm.fleet.held import held_reason
from farm.queue.models import DeviceState
from farm.queue.records import DeviceRecord
from farm.queue.scheduler import DeviceView, matches
from farm.queue.spec import DeviceSelection
from farm.queue.store import Store
from farm.tvm import tracker as tracker_client
from farm.tvm.protocol import (
    RPC_CODE_MISMATCH,
    RPC_MAGIC,
    RPC_TRACKER_MAGIC,
    FrameError,
    TrackerCode,
    encode_frame,
    pack_int32,
    read_frame,
)
from farm.tvm.relay import Offer
from farm.tvm.tracker import TrackerSummary

__all__ = ["Pool", "PoolKeys", "pool_keys", "poolable"]

#: Each pool key and the phones it offers (None: every poolable phone).
PoolKeys = Mapping[str, DeviceSelection | None]

log = structlog.get_logger(__name__)

HANDSHAKE_TIMEOUT_S = 30.0  # a client's magic and key at the gate
TRACKER_TIMEOUT_S = 5.0  # one registrar call
MAX_KEY_BYTES = 4096  # a client key is "client:<matchkey> -timeout=N"


def pool_keys(pool: PoolSettings) -> dict[str, DeviceSelection | None]:
    """The pool keys of the config and the phones each offers.

    ``pool.key`` offers every poolable phone; each ``pool.keys`` entry those
    its selection matches (``abi``, ``soc``, ``gpu``, ``sdk_min``, as a job's).
    """
    found: dict[str, DeviceSelection | None] = {
        name: DeviceSelection.model_validate(selection.model_dump(exclude_none=True))
        for name, selection in pool.keys.items()
    }
    if pool.key is not None:
        found[pool.key] = None
    return found


def poolable(device: DeviceRecord, reserved: Collection[str], offer: Offer | None,
             summary: TrackerSummary | None) -> bool:
    """Whether a phone may be offered under the pool key now.

    It must be ready, not drained, held by no attempt and no session outside
    farm, not reserved, registered through its relay (``offer``), and its own
    key's entry must be free in the tracker (no session of farm's, e.g. a health
    probe, runs on it; with no summary nothing is offered).
    """
    return (device.state is DeviceState.READY and not device.drained
            and device.attempt_id is None and device.held_outside is None
            and device.serial not in reserved and offer is not None
            and summary is not None and summary.queue(offer.key).free > 0)


@dataclass
class _Gate:
    """One pooled phone: its gate listener, its registrar connection, the entries issued."""

    serial: str
    server: asyncio.Server
    port: int
    registrar: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    entries: dict[str, str] = field(default_factory=dict)  # pool key -> matchkey put last
    issued: dict[str, str] = field(default_factory=dict)  # matchkey -> pool key, unused yet
    session: str | None = None  # the client of a running pool session


class Pool:
    """Offers idle phones under a shared tracker key; farmd calls :meth:`sync` periodically.

    Args:
        keys: each pool key and the phones it offers (``pool.key``: all;
            ``pool.keys``: those matching its selection).
        tracker: ``(host, port)`` of the tracker.
        store: the queue (device states, reservations, held marks).
        clock: wall time for the held marks.
        loop: the loop the gates and registrars run on (farmd's, the relays' loop).
        offers: each usb-only phone's newest registration, by serial
            (:attr:`farm.tvm.relay.Relay.offer`).
        on_free: called when a pool session ended (farmd wakes its dispatcher).
        host: the address the gates listen on and clients are sent to.
    """

    def __init__(self, keys: PoolKeys, tracker: tuple[str, int], store: Store, clock: Clock,
                 loop: LoopThread, offers: Callable[[], Mapping[str, Offer]], *,
                 on_free: Callable[[], None] | None = None, host: str = "127.0.0.1") -> None:
        self.keys = dict(keys)
        self.tracker = tracker
        self.store = store
        self.clock = clock
        self.loop = loop
        self.offers = offers
        self.on_free = on_free
        self.host = host
        self._gates: dict[str, _Gate] = {}
        self._offers: Mapping[str, Offer] = {}

    # -- read from other threads ----------------------------------------------------

    def in_session(self, serial: str) -> bool:
        """Whether a pool session through the gate holds the phone (for :class:`HeldWatch`)."""
        gate = self._gates.get(serial)
        return gate is not None and gate.session is not None

    def offered(self) -> set[str]:
        """Serials offered under the pool key now."""
        return {s for s, g in self._gates.items() if g.registrar is not None}

    # -- the periodic sync ------------------------------------------------------------

    def sync(self) -> set[str]:
        """Offer the phones that are poolable now and withdraw the others.

        Reads the store and the tracker's summary on the caller's thread, then
        updates the registrars on the loop.

        Returns:
            The serials offered after this sync.
        """
        now = self.clock.now()
        devices = self.store.list_devices()
        reserved = {r.serial for r in self.store.reservations(now=now)}
        offers = dict(self.offers())
        try:
            summary: TrackerSummary | None = tracker_client.summary(*self.tracker)
        except TrackerUnreachable:
            summary = None
        want: dict[str, set[str]] = {}
        for device in devices:
            if poolable(device, reserved, offers.get(device.serial), summary):
                view = DeviceView(device.serial, device.state, device.drained, device.facts)
                keys = {k for k, selection in self.keys.items()
                        if selection is None or matches(selection, view)}
                if keys:
                    want[device.serial] = keys
        self.loop.run(self._apply(want, offers), timeout_s=60)
        return self.offered()

    async def _apply(self, want: Mapping[str, set[str]], offers: Mapping[str, Offer]) -> None:
        self._offers = offers
        for serial in sorted(set(self._gates) | set(want)):
            gate = self._gates.get(serial)
            keys = want.get(serial)
            if not keys:
                if gate is not None and gate.registrar is not None:
                    await self._withdraw(gate, "not poolable")
                continue
            if gate is None:
                gate = await self._open_gate(serial)
            elif not set(gate.entries) <= keys:  # its facts changed: offer afresh
                await self._withdraw(gate, "pool keys changed")
            try:
                await self._keep_offered(gate, keys)
            except (OSError, FrameError, asyncio.IncompleteReadError, TimeoutError) as exc:
                log.warning("pool_offer_failed", serial=serial, reason=str(exc))
                await self._withdraw(gate, "tracker connection failed")

    async def _open_gate(self, serial: str) -> _Gate:
        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._on_client(self._gates[serial], reader, writer)

        server = await asyncio.start_server(on_client, self.host, 0)
        gate = _Gate(serial, server, int(server.sockets[0].getsockname()[1]))
        self._gates[serial] = gate
        return gate

    async def _keep_offered(self, gate: _Gate, keys: set[str]) -> None:
        """Open the registrar if needed; put a new entry for each key whose last was taken."""
        registrar = gate.registrar
        if registrar is None:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*self.tracker), TRACKER_TIMEOUT_S)
            gate.registrar = registrar = (reader, writer)
            writer.write(pack_int32(RPC_TRACKER_MAGIC))
            magic = await asyncio.wait_for(reader.readexactly(4), TRACKER_TIMEOUT_S)
            if magic != pack_int32(RPC_TRACKER_MAGIC):
                raise FrameError("not a tracker")
            # Any "key" makes the tracker drop the entries when this connection closes.
            info = {"key": f"pool:{gate.serial}", "addr": [self.host, gate.port]}
            await _call(registrar, [TrackerCode.UPDATE_INFO.value, info])
            gate.entries.clear()
        pending: list[str] = []
        if gate.entries:
            reply = await _call(registrar, [TrackerCode.GET_PENDING_MATCHKEYS.value])
            pending = reply if isinstance(reply, list) else []
        for key in sorted(keys):
            if gate.entries.get(key) in pending:
                continue
            matchkey = f"{key}:{secrets.token_hex(8)}"
            reply = await _call(
                registrar, [TrackerCode.PUT.value, key, [gate.port, matchkey], self.host])
            if reply != TrackerCode.SUCCESS:
                raise FrameError(f"tracker refused the pool entry: {reply!r}")
            gate.entries[key] = matchkey
            gate.issued[matchkey] = key
            log.info("pool_offered", serial=gate.serial, pool_key=key, gate_port=gate.port)

    async def _withdraw(self, gate: _Gate, reason: str) -> None:
        """Close the registrar: the tracker drops its pool entry (see the module doc)."""
        registrar, gate.registrar = gate.registrar, None
        gate.entries.clear()
        gate.issued.clear()
        if registrar is not None:
            registrar[1].close()
            with contextlib.suppress(OSError):
                await registrar[1].wait_closed()
            log.info("pool_withdrawn", serial=gate.serial, reason=reason)

    # -- the gate ---------------------------------------------------------------------

    async def _on_client(self, gate: _Gate, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        try:
            key = await asyncio.wait_for(_read_client_key(reader), HANDSHAKE_TIMEOUT_S)
            matchkey = key.split()[0].removeprefix("client:") if key.split() else ""
            offer = self._offers.get(gate.serial)
            if (matchkey not in gate.issued or gate.registrar is None or offer is None
                    or gate.session is not None):
                writer.write(pack_int32(RPC_CODE_MISMATCH))
                return
            pool_key = gate.issued.pop(matchkey)
            peername = writer.get_extra_info("peername")
            peer = f"{peername[0]}:{peername[1]}" if peername else None
            reason = f"{held_reason(peer)} (pool key {pool_key})"
            held = await asyncio.to_thread(
                self.store.mark_held_outside, gate.serial, reason, self.clock.now(),
                expect_held=None, expect_attempt=None)
            if not held:  # a job claimed it since the last sync
                writer.write(pack_int32(RPC_CODE_MISMATCH))
                return
            gate.session = peer or "unknown"
            log.info("pool_session_started", serial=gate.serial, peer=peer, pool_key=pool_key)
            try:
                await self._serve(reader, writer, key.replace(matchkey, offer.matchkey, 1), offer)
            finally:
                gate.session = None
                await asyncio.to_thread(
                    self.store.mark_held_outside, gate.serial, None, self.clock.now(),
                    expect_held=reason, expect_attempt=None)
                log.info("pool_session_ended", serial=gate.serial, peer=peer)
                if self.on_free is not None:
                    self.on_free()
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
            return
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     key: str, offer: Offer) -> None:
        """Hand the client to the app's forward with the app's own matchkey, then splice."""
        app_reader, app_writer = await asyncio.wait_for(
            asyncio.open_connection(offer.host, offer.port), TRACKER_TIMEOUT_S)
        try:
            data = key.encode()
            app_writer.write(pack_int32(RPC_MAGIC) + pack_int32(len(data)) + data)
            await app_writer.drain()
            await splice(reader, writer, app_reader, app_writer)
        finally:
            app_writer.close()

    # -- shutdown -----------------------------------------------------------------------

    def close(self) -> None:
        """Withdraw every phone and stop every gate; never raises."""
        async def close_all() -> None:
            for gate in list(self._gates.values()):
                await self._withdraw(gate, "farmd stopping")
                gate.server.close()
            self._gates.clear()

        with contextlib.suppress(Exception):
            self.loop.run(close_all(), timeout_s=10)


async def _call(registrar: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                message: list[Any]) -> Any:
    """Send one tracker message on a registrar connection and return the reply."""
    reader, writer = registrar
    writer.write(encode_frame(message))
    await writer.drain()
    return await asyncio.wait_for(read_frame(reader), TRACKER_TIMEOUT_S)


async def _read_client_key(reader: asyncio.StreamReader) -> str:
    """The key a TVM RPC client sends after its magic (``client:<matchkey> ...``).

    Raises:
        ValueError: not the RPC magic, or a key longer than :data:`MAX_KEY_BYTES`.
        asyncio.IncompleteReadError: the client left mid-handshake.
    """
    magic = int.from_bytes(await reader.readexactly(4), "little", signed=True)
    if magic != RPC_MAGIC:
        raise ValueError(f"not an RPC client (magic {magic:#x})")
    size = int.from_bytes(await reader.readexactly(4), "little", signed=True)
    if not 0 <= size <= MAX_KEY_BYTES:
        raise ValueError(f"client key of {size} bytes")
    return (await reader.readexactly(size)).decode("utf-8", errors="replace")
