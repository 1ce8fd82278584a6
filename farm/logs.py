"""structlog setup for farm's entry points (``farmd``, ``farmctl``).

Only entry points call :func:`configure`; library code just does
``structlog.get_logger()`` and binds context with
``structlog.contextvars.bound_contextvars(serial=..., job_id=...)``.

Off a TTY (systemd, pipes) every event is one JSON line on stdout, which
journald keeps; on a TTY events are rendered by ``ConsoleRenderer``.

Importing structlog costs about 0.15 s of CPU (it imports asyncio and rich's
tracebacks), as much as farmctl's listings may take in all (issue 25). So
the modules on their path take their logger from :func:`get_logger`, which
imports structlog at the first event, and ``farmctl jobs``, ``devices`` and
``wait`` call :func:`configure_on_first_use`: a call that logs nothing never loads it.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import structlog

__all__ = ["configure", "configure_on_first_use", "get_logger"]

_LEVELS = ("debug", "info", "warning", "error", "critical")

#: :func:`configure_on_first_use`'s arguments, applied when structlog is first needed.
_pending: dict[str, Any] | None = None


def get_logger(name: str) -> Any:
    """structlog's logger for ``name``, importing structlog at its first use.

    Returns:
        A stand-in with the methods of structlog's bound logger (``info``,
        ``warning``, ``bind``...); each call goes to the real one.
    """
    return _LazyLogger(name)


class _LazyLogger:
    """A module's logger that imports structlog (and applies a pending configuration) when used."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attribute: str) -> Any:
        if self._logger is None:
            import structlog

            if _pending is not None:
                configure(**_pending)
            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, attribute)


def configure_on_first_use(
    *, json: bool | None = None, level: str = "info", stream: TextIO | None = None
) -> None:
    """:func:`configure`, now if structlog is loaded, else at the first :func:`get_logger` event.

    Only for a process whose every logging module uses :func:`get_logger`
    (``farmctl jobs``, ``devices`` and ``wait``; tests/unit/cli/test_cli_start.py
    checks that they never load structlog): a module that imported structlog itself
    and logged before the first such event would log unconfigured.

    Raises:
        ValueError: ``level`` is not a level's name.
    """
    global _pending  # noqa: PLW0603 - one configuration per process, as structlog's own
    if level.lower() not in _LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(_LEVELS)}")
    if "structlog" in sys.modules:
        configure(json=json, level=level, stream=stream)
    else:
        _pending = {"json": json, "level": level, "stream": stream}


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
    import structlog

    global _pending  # noqa: PLW0603 - one configuration per process, as structlog's own
    _pending = None
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
