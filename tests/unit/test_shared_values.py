"""The views' records share the values many of them hold equal, and keep what is their own."""
from kmon.codec import to_json
from streaming.fold.entity import record_from_json, record_to_json
from streaming.views import ViewOptions, Views
from streaming.views.shared import _PARTITION_FIELDS, _RECORD_FIELDS, SharedValues
from tests.unit.views_builders import BROKERS, keyed, part, topic


def parsed(record):
    """A record as the driver gets it: parsed from its own JSON, sharing nothing with any other."""
    return record_from_json(record_to_json(record), trusted=True)


def test_records_parsed_apart_share_their_repeated_values_in_the_views() -> None:
    a, b = part("t", 0, 1, (1, 2)), part("t", 1, 2, (1, 2), counters={"isr_shrinks": 1})
    views = Views(ViewOptions())
    views.apply(keyed([parsed(r) for r in [*BROKERS, topic("t", {0: (1, 2), 1: (2, 1)}), a, b]]))
    first, second = views.record("c1", "partition:t:0"), views.record("c1", "partition:t:1")
    assert first == a and second == b   # the same values
    assert first.cluster is second.cluster and first.kind is second.kind and first.source is second.source
    assert first.state.topic is second.state.topic and first.state.isr is second.state.isr
    assert first.broker_counters is second.broker_counters is first.counters == {}
    assert second.counters == {"isr_shrinks": 1}   # its own
    assert to_json(first) == record_to_json(a)     # what the API writes of it is unchanged


def test_what_is_shared_is_bounded_and_sharing_goes_on_past_the_bound() -> None:
    shared = SharedValues(max_values=10)
    held = [shared.record(parsed(part(f"t{i}", 0, 1, (1, 2, i)))) for i in range(100)]
    assert len(shared) <= 10 + len(_RECORD_FIELDS) + len(_PARTITION_FIELDS)
    a, b = (shared.record(parsed(part("later", p, 1, (1, 2)))) for p in (0, 1))
    assert a.state.topic is b.state.topic and a.cluster is b.cluster
    assert [r.state.topic for r in held] == [f"t{i}" for i in range(100)]
