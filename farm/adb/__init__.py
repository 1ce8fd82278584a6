"""The adb layer: the only package that imports adbutils.

It runs argv lists on phones with a real deadline per call, holds one lock per
serial, and raises farm's typed errors. It never parses output (``farm.device``
does), retries or reboots (``farm.supervise`` decides that).
"""

from farm.adb.client import Adb, ShellResult
from farm.adb.server import AdbServer
from farm.adb.stream import ShellStream
from farm.adb.tracking import DeviceTracker

__all__ = ["Adb", "AdbServer", "DeviceTracker", "ShellResult", "ShellStream"]
