"""The tile plan: which loops the default CPU schedule vectorizes, register-tiles, blocks.

Its own module so that the rule (:mod:`farm.jobs.cpu_schedules.rules`), which makes a
plan, and the tile's loads and stores (:mod:`farm.jobs.cpu_schedules.tile_io`), which
read one, do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_TILE_ROWS", "TilePlan"]

#: Most rows of a register tile of one vector register a row (half that for two).
#: Measured with AVX-512 on a pinned core: 8 rows of 14 lanes ran a 1x1 conv on
#: 28x28 in 0.058 ms, 4 rows in 0.081 ms; 8 rows of 2x16 lanes were no faster.
#: Here, not in ``rules``, because the conv's legalization sizes its pixel axis by it too
#: (:mod:`farm.jobs.cpu_schedules.legalize_conv`).
MAX_TILE_ROWS = 8


@dataclass(frozen=True)
class TilePlan:
    """How :class:`~farm.jobs.cpu_schedules.rules.TiledReduction` tiles the main block.

    Attributes:
        spatial: indices of the spatial loops, in order.
        reduce: indices of the reduction loops, in order.
        vector: index of the vectorized spatial loop, or None.
        vector_factor: its inner extent.
        tile: index of the register-tiled spatial loop, or None.
        tile_factor: its inner extent.
        block: index of a spatial loop the vector's input reads and another input does not
            (a conv's output channel blocks), split by a knob and unrolled inside the tile
            (each value of the other input then serves ``block_factor`` vectors), or None.
        block_factor: its inner extent, the knob's default decision: as many vectors as
            keep the tile within ``rules.ACCUMULATORS_PER_REGISTER`` of the registers, up
            to ``rules.MAX_TILE_BLOCKS``.
    """

    spatial: list[int]
    reduce: list[int]
    vector: int | None
    vector_factor: int
    tile: int | None
    tile_factor: int
    block: int | None = None
    block_factor: int = 1
