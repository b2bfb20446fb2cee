"""Encoded events cost their length: the publisher's buffer holds up to --buffer-size of them through an
events-cluster outage (kmon/codec.py's encode)."""
from __future__ import annotations

import gc

from kmon.codec import encode
from kmon.events import BrokerState, Event


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_many_encoded_events_held_cost_about_their_length() -> None:
    event = Event(cluster="c", source="zk", kind="broker", entity="broker:1", op="upsert", observed_ms=1,
                  data=BrokerState(broker_id=1, host="h", port=9092, rack=None))
    length = len(encode(event))
    gc.collect()
    before = _resident_bytes()
    held = [encode(event) for _ in range(50_000)]
    grown = _resident_bytes() - before
    assert len(held) == 50_000 and all(len(b) == length for b in held[:10])
    # a bytes object is its length plus ~33 bytes of header, and the list a pointer each; orjson's own
    # bytes kept ~4 KB each (200 MB here)
    assert grown < 50_000 * (length + 200), f"{grown / 50_000:.0f} bytes per event of {length}"
