"""Sample __share_group_state records: both types in each Kafka line's layout (SAMPLES), and their group and topic."""
from __future__ import annotations

from collectors.groups.codec.share_state_codec import ShareSnapshot, ShareUpdate, StateBatch
from tests.unit.offsets_builders import CURRENT, EARLY_ACCESS

G, ORDERS = "orders-share", "5f1c2a3e-8b4d-4e6f-9a0b-1c2d3e4f5a6b"
BATCHES = (StateBatch(1_000, 1_009, 2, 1), StateBatch(1_010, 1_010, 0, 3), StateBatch(1_011, 1_500, 4, 5))
CREATED, WRITTEN = 1_700_000_000_000, 1_700_000_060_000

# (id, record as decoded, layout it is written in): both types in each Kafka line's layout.
SAMPLES: list[tuple[str, ShareSnapshot | ShareUpdate, str]] = [
    ("0-snapshot", ShareSnapshot(G, ORDERS, 7, 3, 1, 12, 1_000, CREATED, WRITTEN, 11, BATCHES), CURRENT),
    ("0-snapshot-4.1", ShareSnapshot(G, ORDERS, 7, 3, 1, 12, 1_000, CREATED, WRITTEN, -1, BATCHES), CURRENT),
    ("0-snapshot-uninitialized", ShareSnapshot(G, ORDERS, 0, 0, 0, -1, -1, CREATED, CREATED, -1, ()), CURRENT),
    ("0-snapshot-4.0", ShareSnapshot(G, ORDERS, 7, 40_000, 1, 12, 1_000, None, None, -1, BATCHES), EARLY_ACCESS),
    ("1-update", ShareUpdate(G, ORDERS, 7, 3, 12, 1_010, 10, BATCHES[1:]), CURRENT),
    ("1-update-4.1", ShareUpdate(G, ORDERS, 7, 3, -1, -1, -1, BATCHES[:1]), CURRENT),
    ("1-update-4.0", ShareUpdate(G, ORDERS, 7, 65_535, 12, 1_010, -1, BATCHES[1:]), EARLY_ACCESS),
]
