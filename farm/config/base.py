"""The base of every settings section: frozen, and a typo'd key is an error."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """A settings section: frozen once validated, and an unknown key is an error naming it."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def host_port(value: str) -> str:
    """``value`` itself if it is ``host:port`` with a port in 1..65535.

    Raises:
        ValueError: it is not (pydantic reports it as the setting's error).
    """
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not host:port")
    return value
