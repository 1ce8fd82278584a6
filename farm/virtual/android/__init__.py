"""The Android userland of a virtual phone: shell, commands, packages, the TVM RPC app.

Public API: :class:`AndroidPhone` (implements ``farm.virtual.contracts.Userland``),
:class:`PhoneSpec` and :func:`profiles`.
"""

from farm.virtual.android.phone import AndroidPhone
from farm.virtual.android.spec import PhoneSpec, ThermalSensor, profiles

__all__ = ["AndroidPhone", "PhoneSpec", "ThermalSensor", "profiles"]
