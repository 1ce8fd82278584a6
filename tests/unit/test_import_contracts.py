"""The import contracts that list packages by name list every package of farm.

import-linter's ``forbidden`` contracts take their sources by name, so a new package
would silently escape "only the controllers speak adb" (pyproject.toml).
"""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import farm

ROOT = Path(__file__).resolve().parents[2]

#: The packages that may import farm.adb (docs/architecture.md, "Floors").
ADB_SPEAKERS = {"farm.adb", "farm.controllers", "farm.provision", "farm.virtual"}


def contracts() -> dict[str, dict]:
    """The import contracts of pyproject.toml by id."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"] if "id" in c}


def farm_packages() -> set[str]:
    """Every top-level module and package of farm, as ``farm.NAME``."""
    return {f"farm.{m.name}" for m in pkgutil.iter_modules(farm.__path__)}


def test_adb_contract_names_every_other_package():
    """Every package but the adb speakers is a source of the farm.adb contract."""
    sources = set(contracts()["adb-behind-controllers"]["source_modules"])
    assert sources == farm_packages() - ADB_SPEAKERS


def test_adbutils_contract_names_every_package_but_adb():
    """Every package but farm.adb is a source of the adbutils contract."""
    sources = set(contracts()["adbutils-in-adb"]["source_modules"])
    assert sources == farm_packages() - {"farm.adb"}
