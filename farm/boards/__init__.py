"""Linux boards reached over SSH: their commands (``commands.py``) and targets (``targets.py``).

The device controller that uses them is :mod:`farm.controllers.board`.
"""
