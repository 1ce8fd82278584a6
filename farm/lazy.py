"""Names of a package imported on first use (PEP 562), so farmctl starts without the heavy ones.

``farm.queue`` and ``farm.runner`` export names whose modules load SQLAlchemy's
ORM, TVM or the dispatcher; a command that needs none of them should not pay
for them before it parses its arguments.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, sources: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports each name of ``sources`` from its module when asked.

    Args:
        package: the package's ``__name__``, for the error message.
        sources: exported name -> the module that defines it.

    Raises:
        AttributeError: (from the returned function) a name not in ``sources``.
    """

    def __getattr__(name: str) -> Any:  # noqa: N807 (PEP 562's name)
        module = sources.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
