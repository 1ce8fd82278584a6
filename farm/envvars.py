"""The names of farm's environment variables, apart from :mod:`farm.config`.

``farmctl``'s group declares ``--config``, ``--server`` and ``--token`` with
these names before it parses anything; importing :mod:`farm.config` (pydantic)
for three strings would cost ``farmctl --version`` a tenth of a second.
:mod:`farm.config` reads them from here.
"""

from __future__ import annotations

__all__ = ["ENV_NOT_SETTINGS", "ENV_PATH", "ENV_PREFIX", "ENV_SERVER", "ENV_TOKEN"]

#: Every setting can come from ``FARM_<SECTION>__<NAME>``.
ENV_PREFIX = "FARM_"
#: The config file's path.
ENV_PATH = "FARM_CONFIG"
#: ``farmctl --server`` and ``--token`` from the environment: farmctl's, not settings.
ENV_SERVER = "FARM_SERVER"
ENV_TOKEN = "FARM_TOKEN"  # noqa: S105 (the variable's name, not a token)
#: ``FARM_`` variables that are not settings (every other one must be one).
ENV_NOT_SETTINGS = frozenset({ENV_PATH, ENV_SERVER, ENV_TOKEN})
