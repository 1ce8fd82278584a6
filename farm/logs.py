"""structlog setup for farm's entry points (``farmd``, ``farmctl``).

Only entry points call :func:`configure`; library code just does
``structlog.get_logger()`` and binds context with
``structlog.contextvars.bound_contextvars(serial=..., job_id=...)``.

Off a TTY (systemd, pipes) every event is one JSON line on stdout, which
journald keeps; on a TTY events are rendered by ``ConsoleRenderer``.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

_LEVELS = ("debug", "info", "warning", "error", "critical")


def configure(
    *, json: bool | None = None, level: str = "info", stream: TextIO | None = None
) -> None:
    """Configure structlog for the whole process.

    Args:
        json: JSON lines if True, console rendering if False; None picks JSON
            unless ``stream`` is a TTY.
        level: the lowest level logged: debug, info, warning, error or critical.
        stream: where events go; stdout by default.

    Raises:
        ValueError: ``level`` is not one of the names above.
    """
    name = level.lower()
    if name not in _LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(_LEVELS)}")
    out = stream if stream is not None else sys.stdout
    if json is None:
        json = not (hasattr(out, "isatty") and out.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=out.isatty() if hasattr(out, "isatty") else False)
    )
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if json:
        processors.append(structlog.processors.format_exc_info)
    processors.append(renderer)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(name.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
