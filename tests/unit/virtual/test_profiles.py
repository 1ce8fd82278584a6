"""The virtual fleet's phone models: mixed by default, one model when asked."""

from __future__ import annotations

from farm.virtual.android.spec import profiles


class TestProfiles:
    def test_default_fleet_cycles_through_models(self) -> None:
        """Four phones are four models (what a mixed drawer looks like)."""
        assert len({spec.model for spec in profiles(4)}) == 4

    def test_same_model_fleet_is_one_model(self) -> None:
        """same_model gives every phone the first model, as tune --phones 2 needs."""
        specs = profiles(3, "lan", same_model=True)
        assert {(spec.model, spec.network) for spec in specs} == {(profiles(1)[0].model, "lan")}
