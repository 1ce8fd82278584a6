"""NVIDIA GPU hosts: NVML readings (:mod:`farm.gpu.nvml`) and the CUDA RPC server (:mod:`farm.gpu.server`).

The device-controller of kind ``gpu`` that uses them is :mod:`farm.controllers.gpu`.
"""
