"""Where farm's settings come from: the TOML file and ``FARM_...`` variables, merged.

:func:`config_data` finds the file (``--config``, ``$FARM_CONFIG``, then
:data:`DEFAULT_PATH`), reads it and lays the environment's overrides over it,
without validating anything: :func:`farm.config.load_config` validates the
result (and holds every default). It lives apart from :mod:`farm.config` so that
``farmctl jobs`` and ``devices`` can find farmd's data folder without importing
pydantic and building the settings' models (a tenth of a second, issue 25).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from farm.envvars import ENV_NOT_SETTINGS, ENV_PATH, ENV_PREFIX
from farm.errors import ConfigError

__all__ = ["DEFAULT_DATA_DIR", "DEFAULT_PATH", "config_data"]

#: The config file read when neither ``--config`` nor ``$FARM_CONFIG`` names one.
DEFAULT_PATH = Path("/etc/farm/farm.toml")

#: ``data_dir`` when neither the file nor ``FARM_DATA_DIR`` sets it (the field's
#: default in :class:`farm.config.Settings`; here so that farmctl's listings find
#: a farmd on the defaults without pydantic).
DEFAULT_DATA_DIR = "~/.local/share/farm"


def config_data(path: str | Path | None, env: Mapping[str, str],
                default_path: Path = DEFAULT_PATH) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings as the file and the environment give them, not yet validated.

    Args:
        path: the TOML file (``--config``); None means ``$FARM_CONFIG``, then
            ``default_path`` if it exists, else no file.
        env: the environment to read ``FARM_CONFIG`` and ``FARM_...`` overrides from.
        default_path: the file read when none is named.

    Returns:
        The merged settings tree, and for each dotted key an environment
        variable set, that variable's name.

    Raises:
        ConfigError: the named file is missing, or a file is unreadable or not
            TOML, or a variable is malformed.
    """
    if path is None and env.get(ENV_PATH):
        path = env[ENV_PATH]
    if path is not None:
        data = _read_toml(Path(path))
    elif default_path.is_file():
        data = _read_toml(default_path)
    else:
        data = {}
    overrides, sources = _env_overrides(env)
    return _merge(data, overrides), sources


def _env_overrides(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Turn ``FARM_A__B=v`` variables into ``{"a": {"b": v}}`` and remember their names."""
    tree: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in ENV_NOT_SETTINGS:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        if not all(path):
            raise ConfigError(name, "empty key segment in the variable name")
        value: Any = raw
        if raw.lstrip().startswith(("[", "{")):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(".".join(path), f"${name} is not valid JSON: {exc.msg}") from None
        node = tree
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(".".join(path), f"${name} conflicts with another variable")
            node = child
        node[path[-1]] = value
        sources[".".join(path)] = name
    return tree, sources


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(str(path), "config file not found") from None
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read config file: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # tomllib decodes the file as UTF-8 first
        raise ConfigError(str(path), f"not valid TOML: not UTF-8 text (byte "
                                     f"{exc.object[exc.start]:#04x} at offset {exc.start})"
                          ) from None
