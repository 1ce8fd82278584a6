"""The fleet: each device's lifecycle from plugged in to ready, and back.

``lifecycle.py`` decides (pure); ``manager.py`` acts on those decisions through
each device's controller and the store, with its parts beside it
(``provisioning``, ``sweeping``, ``serving``, ``recovery``, ``probing``,
``app_watch``, ``held``), each handed the narrow face it uses (``ports.py``),
never the manager.
"""
