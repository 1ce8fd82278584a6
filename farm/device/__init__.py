"""Pure parsers: Android command output in, frozen dataclasses out.

No I/O and no adb here: ``farm/adb`` runs the commands and these functions read
what they printed. Every parser raises ``ValueError`` naming what it could not
read rather than returning a guess; the caller (which knows the serial) maps
that to a :class:`farm.errors.PhoneFault`. Real outputs with their origin are in
``tests/fixtures/android`` (see its README).

One module per source::

    getprop.py      getprop                              -> dict[str, str]
    battery.py      dumpsys battery                      -> BatteryState
    thermal.py      dumpsys thermalservice, thermal zones -> ThermalState, [ThermalZone]
    storage.py      df -k                                -> [Filesystem]
    cpu.py          /proc/cpuinfo, cpufreq, /proc/meminfo
    processes.py    pidof, ps -A                         -> [int], [Process]
    packages.py     pm install|path|list, dumpsys package
    power.py        dumpsys power, settings stay_on       -> PowerState
    logcat.py       logcat (threadtime)                  -> [Crash]
    uiautomator.py  uiautomator dump XML                 -> [UiNode]
    adb_devices.py  host adb devices [-l]                -> [DeviceEntry]
    facts.py        the above                            -> DeviceFacts
"""
