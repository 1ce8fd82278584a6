"""Virtual Android phones that the real adb server accepts as devices.

They are the demo fleet for newcomers and the fault injector for tests. Nothing
above ``farm/adb`` may know a phone is virtual: everything reaches them through
the adb server, exactly as it reaches a phone on a USB hub.

Architecture (one job per module)::

    contracts.py     the typed seams between the parts below
    adbd/            adbd: the ADB transport over TCP (AOSP protocol.txt) and its
                     services (shell v1/v2, exec, sync, reverse, tcp:, reboot,
                     root: refused as on a user build)
    net.py           a phone's network: device-side ports, adb reverse/forward
                     tunnels, lan vs usb-only reachability
    android/         the Android userland: shell interpreter and commands, props,
                     package manager (reads real APKs), activity manager, the
                     TVM RPC app, battery and heat
    rpc_process.py   the app's RPC process: a real TVM RPC server in its own
                     process group
    phone.py         VirtualPhone = adbd + net + android, plus the fault API
    fleet.py         N phones on one event loop, attached to the adb server
    cli.py           ``farm-phones serve`` and ``farm-phones fault``
"""
