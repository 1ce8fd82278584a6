"""Provisioning: put the signed TVM RPC app on a phone and point it at the tracker.

``policy.py`` decides (pure), ``apk.py`` installs, ``launch.py`` configures and
starts the app, ``tunnels.py`` sets up adb reverse/forward for usb-only phones.
"""
