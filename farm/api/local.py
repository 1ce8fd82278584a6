"""farmd's local listing socket: ``farmctl jobs`` and ``devices`` answered by the farmd at hand.

``farmctl jobs`` spent 0.6 of its 0.7 CPU seconds importing SQLAlchemy's ORM,
the queue's models and pydantic (the settings' models) before it read a row
(issue 25). farmd has all of that loaded and its store open, so on a farm host
farmctl asks it instead::

    farmctl ──{"listing": "jobs", "config": {...}, "args": {...}}──> <data_dir>/farmd.list
            <──{"rows": [...]}── farmd: Settings(config), FarmService(its store), farm.api.listings

The request carries farmctl's own settings as its file and environment give
them (:func:`farm.config_source.config_data`): farmd validates them and builds
the rows with them on its open store, with the builder farmctl uses on the
database (:mod:`farm.api.listings`), so the output is the same either way.
farmd refuses when those settings name another database than its own; then,
as when no farmd listens or it does not answer within :data:`ANSWER_TIMEOUT_S`,
:func:`ask_farmd` returns None and farmctl reads the database itself. Invalid
settings are refused too, so farmctl's own :func:`~farm.config.load_config`
reports them as before.

The socket is a unix stream socket in the data folder, created under farmd's
umask (:func:`farm.privacy.restrict_umask`): only farmd's user can connect,
the user who can already read its SQLite database. It lists; it changes nothing.

Rows travel as JSON: enums as their values and tuples as lists (which render
alike), datetimes as ``{"$datetime": ISO 8601}`` and back.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from farm.clock import Clock
    from farm.config import Settings
    from farm.queue.store import Store

__all__ = ["ANSWER_TIMEOUT_S", "LISTING_SOCKET", "ListingServer", "ask_farmd", "listing_path"]

#: The socket's name in farmd's data folder.
LISTING_SOCKET = "farmd.list"
#: How long farmctl waits for farmd's rows before it reads the database itself:
#: a listing takes farmd milliseconds; a farmd this slow is better not waited on.
ANSWER_TIMEOUT_S = 10.0
#: The largest request farmd reads (a config file and its arguments), bytes.
REQUEST_MAX_BYTES = 1 << 20
_DATETIME = "$datetime"
#: How often the serving thread looks whether :meth:`ListingServer.close` asked it
#: to stop (``serve_forever``'s 0.5 s default would add that much to farmd's stop).
_POLL_S = 0.05


def listing_path(data_dir: Path) -> Path:
    """The listing socket of the farmd of ``data_dir``."""
    return Path(data_dir).expanduser() / LISTING_SOCKET


def _encode(value: object) -> object:
    """``json.dumps``' fallback: datetimes tagged, sets and paths as lists and strings."""
    if isinstance(value, datetime):
        return {_DATETIME: value.isoformat()}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _decode(obj: dict[str, Any]) -> object:
    if len(obj) == 1 and isinstance(obj.get(_DATETIME), str):
        return datetime.fromisoformat(obj[_DATETIME])
    return obj


def ask_farmd(data_dir: Path, listing: str, config: Mapping[str, Any],
              args: Mapping[str, Any]) -> Any | None:
    """The listing ``listing`` from the farmd of ``data_dir``; None if none answers it.

    Args:
        data_dir: the data folder as the settings name it (``~`` and relative allowed).
        listing: ``jobs`` or ``devices`` (:data:`ListingServer.LISTINGS`).
        config: the caller's settings as file and environment give them
            (:func:`farm.config_source.config_data`).
        args: the builder's keyword arguments.

    Returns:
        What the builder returned (lists for tuples), or None: no farmd listens,
        it refused (another database, invalid settings) or did not answer in time.
    """
    folder = Path(data_dir).expanduser().absolute()
    try:
        request = json.dumps({"listing": listing, "args": args,
                              "config": {**config, "data_dir": str(folder)}}, default=_encode)
    except (TypeError, ValueError):  # a TOML date in the settings: let farmctl read them
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(ANSWER_TIMEOUT_S)
            sock.connect(str(listing_path(folder)))
            sock.sendall(request.encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(1 << 16):
                chunks.append(chunk)
        answer = json.loads(b"".join(chunks), object_hook=_decode)
    except (OSError, ValueError):  # no farmd, a dead one's socket, a cut answer
        return None
    return answer.get("rows") if isinstance(answer, dict) else None


class _Handler(socketserver.StreamRequestHandler):
    """One request: a JSON line in, a JSON answer out, then the connection closes."""

    server: _Server
    timeout = ANSWER_TIMEOUT_S

    def handle(self) -> None:
        line = self.rfile.readline(REQUEST_MAX_BYTES)
        answer = self.server.listing_server.answer(line)
        self.wfile.write(json.dumps(answer, default=_encode).encode())


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    listing_server: ListingServer


class ListingServer:
    """farmd's side of the listing socket: serves on a thread until :meth:`close`.

    Args:
        data_dir: farmd's data folder; the socket is :func:`listing_path` of it.
        store: farmd's open store.
        settings: farmd's settings: a request naming another database is refused.
        clock: the time source of the rows (waiting reasons, readings' age).

    Raises:
        OSError: the socket cannot be bound (its path is longer than a unix
            socket address holds, the folder is read-only).
    """

    #: The listings served: :mod:`farm.api.listings`' builders by name.
    LISTINGS = ("jobs", "devices")

    def __init__(self, data_dir: Path, store: Store, settings: Settings, clock: Clock) -> None:
        self.path = listing_path(data_dir)
        self.store = store
        self.settings = settings
        self.clock = clock
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a dead farmd's socket; only one farmd owns the folder
        self._server = _Server(str(self.path), _Handler)
        self._server.listing_server = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="farmd-list",
                                        args=(_POLL_S,), daemon=True)
        self._thread.start()

    def answer(self, line: bytes) -> dict[str, Any]:
        """The answer to one request line: ``{"rows": ...}`` or ``{"refused": why}``."""
        from pydantic import ValidationError

        from farm import logs
        from farm.api import listings
        from farm.api.service import FarmService
        from farm.config import Settings
        from farm.errors import FarmError

        name = None
        try:
            request = json.loads(line)
            name = request["listing"]
            if name not in self.LISTINGS:
                return {"refused": f"no listing {name!r}"}
            settings = Settings.model_validate(request["config"])
            if settings.database_url != self.settings.database_url:
                return {"refused": "another database than farmd's"}
            queue = FarmService(self.store, settings, self.clock)
            builder = listings.job_listing if name == "jobs" else listings.device_listing
            return {"rows": builder(queue, **request["args"])}
        except (ValueError, KeyError, TypeError, ValidationError, FarmError) as exc:
            return {"refused": f"{type(exc).__name__}: {exc}"}
        except Exception:  # a bug: farmd keeps serving; farmctl reads the database
            log = logs.get_logger(__name__)
            log.exception("listing_failed", listing=name)
            return {"refused": "farmd failed to list: see its log"}

    def close(self) -> None:
        """Stop serving and remove the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
