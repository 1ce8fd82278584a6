"""adbd: the device side of the ADB transport (AOSP ``adb/protocol.txt``) over TCP.

Modules, one job each::

    packet.py      the 24-byte header, magic and checksum
    auth.py        adbkey.pub keys and token signatures
    stream.py      one stream with WRTE/OKAY flow control
    transport.py   one adb server connection: CNXN, AUTH, OPEN/OKAY/WRTE/CLSE
    shell.py       shell: (v1), shell,v2 and exec:
    sync.py        sync: (push, pull, ls)
    services.py    service routing, reverse:, tcp:, reboot:
    daemon.py      Adbd: the listener, its transports, auth and faults
"""

from farm.virtual.adbd.daemon import FEATURES, Adbd

__all__ = ["FEATURES", "Adbd"]
