"""NVIDIA GPU hosts: NVML readings and the CUDA RPC server.

:mod:`farm.gpu.nvml` reads and parses NVML; :mod:`farm.gpu.server` runs one GPU's
RPC server, which serves each session in its own process. The device controller
of kind ``gpu`` that uses them is :mod:`farm.controllers.gpu`.
"""
