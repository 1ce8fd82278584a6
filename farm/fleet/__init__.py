"""The fleet: each phone's lifecycle from plugged in to ready, and back.

``lifecycle.py`` decides (pure); ``manager.py`` acts on those decisions with
adb, the provisioning steps and the store.
"""
