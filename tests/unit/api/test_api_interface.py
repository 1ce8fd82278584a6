"""The service interface: one list of the API's methods, which both services implement alike."""

from __future__ import annotations

import inspect

import pytest

from farm.api.interface import Queue
from farm.api.service import FarmService
from farm.client.remote import RemoteService

#: The interface's methods, by name (its own, not Protocol's machinery).
METHODS = sorted(name for name, member in vars(Queue).items()
                 if inspect.isfunction(member) and not name.startswith("_"))


class TestInterface:
    def test_both_services_subclass_the_one_interface(self) -> None:
        """FarmService (local, and the routes') and RemoteService say they implement Queue."""
        assert Queue in FarmService.__mro__
        assert Queue in RemoteService.__mro__
        assert "submit" in METHODS and "reservations" in METHODS

    @pytest.mark.parametrize("service", [FarmService, RemoteService])
    def test_each_method_takes_the_interfaces_parameters(self, service: type) -> None:
        """Same parameter names, kinds and defaults as the interface, method by method."""
        for name in METHODS:
            ours = inspect.signature(getattr(service, name)).parameters
            theirs = inspect.signature(getattr(Queue, name)).parameters
            assert [(p.name, p.kind, p.default) for p in ours.values()] == \
                [(p.name, p.kind, p.default) for p in theirs.values()], name
            assert getattr(service, name) is not getattr(Queue, name), name
