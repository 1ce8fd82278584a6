"""Values as JSON types, for farmctl's ``--json`` and the dashboard's JSON alike.

:mod:`farm.cli.output` prints with it and :mod:`farm.web` answers with it; it sits
below both so that the dashboard does not import the command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

__all__ = ["plain"]


def plain(value: Any) -> Any:
    """``value`` as JSON types: datetimes to ISO strings, enums to values, dataclasses to dicts."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if is_dataclass(value) and not isinstance(value, type):
        return plain(asdict(value))
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    return value
