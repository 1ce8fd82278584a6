"""Which health samples to delete so one per phone per time bucket is left.

Pure, on plain rows: :meth:`farm.queue.health_samples.HealthSampleOps.downsample_health` streams
the rows through it, and :mod:`farm.retention` (above the queue) decides when.
It lives in the queue because the queue's own delete uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime

__all__ = ["health_ids_to_drop"]


def health_ids_to_drop(
    rows: Iterable[tuple[int, str, datetime]], bucket_s: float
) -> Iterator[int]:
    """Ids of health samples to delete so one per phone per time bucket is left.

    Args:
        rows: ``(id, serial, at)`` of the samples to thin, grouped by serial and
            sorted by ``at``, then id within it (as the index ``(serial, at)``
            reads them), so that only the current bucket is held: a year of
            samples streams through.
        bucket_s: bucket width, seconds; buckets are aligned to the Unix epoch.

    Yields:
        Every id but the last (the latest sample) of each (serial, bucket).

    Raises:
        ValueError: ``bucket_s`` is not above 0, or the rows are not sorted.
    """
    if bucket_s <= 0:
        raise ValueError(f"bucket_s must be above 0, got {bucket_s:g}")
    previous: tuple[str, datetime, int] | None = None
    previous_bucket: tuple[str, int] | None = None
    for row_id, serial, at in rows:
        # Serials only need to be grouped: the database's collation orders them its own way.
        if previous is not None and serial == previous[0] and (at, row_id) < previous[1:]:
            raise ValueError("health rows must be sorted by serial, at, id")
        bucket = (serial, int(at.timestamp() // bucket_s))
        if previous is not None and bucket == previous_bucket:
            yield previous[2]  # a later sample of the same bucket follows: drop this one
        previous, previous_bucket = (serial, at, row_id), bucket
