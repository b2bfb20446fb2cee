"""Sample modern group records of __consumer_offsets: every type (3-24) and value layout (SAMPLES), encoded."""
from __future__ import annotations

from collectors.groups.codec.offsets_codec import (
    ClassicMemberProtocol,
    ConsumerGroupMember,
    ConsumerGroupMetadata,
    CurrentAssignment,
    UserEndpoint,
    GroupTopicMetadata,
    GroupType,
    ResolvedRegularExpression,
    ShareGroupMember,
    ShareGroupMetadata,
    ShareGroupStatePartitions,
    ShareStateTopic,
    StreamsCurrentAssignment,
    StreamsGroupMember,
    StreamsGroupMetadata,
    StreamsResolvedTopicIds,
    StreamsTargetAssignment,
    StreamsTasks,
    StreamsTopology,
    Subtopology,
    SubtopologyTasks,
    SubtopologyTopicIds,
    TargetAssignment,
    TargetAssignmentMetadata,
    TopicMetadata,
    TopicPartitions,
)
from tests.unit.offsets_builders import CURRENT, EARLY_ACCESS, encode

CONSUMER, SHARE, STREAMS = GroupType.CONSUMER, GroupType.SHARE, GroupType.STREAMS
ORDERS = "5f1c2a3e-8b4d-4e6f-9a0b-1c2d3e4f5a6b"
PAYMENTS = "00000000-0000-0000-0000-00000000abcd"
G, M = "orders-app", "member-Vh3wS9qkR8C0"
TPS = (TopicPartitions(ORDERS, (0, 1, 5)), TopicPartitions(PAYMENTS, ()))
TOPICS = (TopicMetadata(ORDERS, "orders", 6), TopicMetadata(PAYMENTS, "payments", 12))
TASKS = StreamsTasks(
    active=(SubtopologyTasks("0", (0, 1)), SubtopologyTasks("1", (2,))),
    standby=(SubtopologyTasks("0", (3,)),),
)


def consumer_member(classic: ClassicMemberProtocol | None = None, **kw: object) -> ConsumerGroupMember:
    fields: dict = dict(
        group=G,
        member_id=M,
        instance_id="static-1",
        rack_id="rack-a",
        client_id="consumer-1",
        client_host="/10.0.0.1",
        subscribed_topic_names=("orders", "payments"),
        subscribed_topic_regex=None,
        rebalance_timeout_ms=300_000,
        server_assignor="uniform",
        classic_protocol=classic,
    )
    fields.update(kw)
    return ConsumerGroupMember(**fields)


def streams_member(endpoint: UserEndpoint | None) -> StreamsGroupMember:
    return StreamsGroupMember(
        G, M, None, "rack-b", "app-StreamThread-1", "/10.0.0.2", 45_000, 3, "process-7c1e",
        endpoint, (("zone", "eu-1a"), ("ssd", "yes")),
    )


TOPOLOGY = StreamsTopology(G, 3, (
    Subtopology("0", ("orders",), (), ("app-store-changelog",), ("app-repartition",), ()),
    Subtopology("1", (), ("pay.*",), (), (), ("app-repartition",)),
))

# (id, record as decoded, layout it is written in): every record type and value layout.
SAMPLES: list[tuple[str, object, str]] = [
    ("3-consumer-metadata", ConsumerGroupMetadata(G, 42, 0x1234_5678_9ABC_DEF0), CURRENT),
    ("3-consumer-metadata-before-4.1", ConsumerGroupMetadata(G, 1, 0), CURRENT),
    ("4-consumer-topics", GroupTopicMetadata(G, CONSUMER, TOPICS), CURRENT),
    ("4-consumer-topics-3.7", GroupTopicMetadata(G, CONSUMER, TOPICS), EARLY_ACCESS),
    ("5-consumer-member", consumer_member(), CURRENT),
    ("5-consumer-member-classic",
     consumer_member(ClassicMemberProtocol(45_000, ("range", "cooperative-sticky"))), CURRENT),
    ("5-consumer-member-regex", consumer_member(subscribed_topic_names=(), subscribed_topic_regex="ord.*",
                                                instance_id=None, rack_id=None, server_assignor=None), CURRENT),
    ("5-consumer-member-3.7", consumer_member(), EARLY_ACCESS),
    ("6-consumer-target-metadata", TargetAssignmentMetadata(G, CONSUMER, 42, 1_700_000_000_000), CURRENT),
    ("6-consumer-target-metadata-before-4.3", TargetAssignmentMetadata(G, CONSUMER, 41, 0), CURRENT),
    ("7-consumer-target", TargetAssignment(G, CONSUMER, M, TPS), CURRENT),
    ("7-consumer-target-3.7", TargetAssignment(G, CONSUMER, M, TPS), EARLY_ACCESS),
    ("8-consumer-current", CurrentAssignment(G, CONSUMER, M, 42, 41, 1, TPS[:1], TPS[1:]), CURRENT),
    ("8-consumer-current-3.7", CurrentAssignment(G, CONSUMER, M, 42, 41, None, TPS[:1], TPS[1:]), EARLY_ACCESS),
    ("9-share-topics-4.0", GroupTopicMetadata(G, SHARE, TOPICS), CURRENT),
    ("10-share-member", ShareGroupMember(G, M, None, "share-1", "/10.0.0.3", ("orders",)), CURRENT),
    ("11-share-metadata", ShareGroupMetadata(G, 7, -5), CURRENT),
    ("11-share-metadata-4.0", ShareGroupMetadata(G, 7, 0), EARLY_ACCESS),
    ("12-share-target-metadata", TargetAssignmentMetadata(G, SHARE, 7, 0), CURRENT),
    ("13-share-target", TargetAssignment(G, SHARE, M, TPS), CURRENT),
    ("14-share-current", CurrentAssignment(G, SHARE, M, 7, 6, 0, TPS, ()), CURRENT),
    ("15-share-state-partitions", ShareGroupStatePartitions(
        G,
        (ShareStateTopic(ORDERS, "orders", (4, 5)),),
        (ShareStateTopic(ORDERS, "orders", (0, 1, 2, 3)),),
        (ShareStateTopic(PAYMENTS, "payments", ()),),
    ), CURRENT),
    ("15-share-state-partitions-4.0", ShareGroupStatePartitions(
        G, (), (ShareStateTopic(ORDERS, "orders", (0, 1)),), ()
    ), EARLY_ACCESS),
    ("16-consumer-regex",
     ResolvedRegularExpression(G, "ord.*", ("orders", "orders-dlq"), 17, 1_700_000_000_001), CURRENT),
    ("17-streams-metadata", StreamsGroupMetadata(G, 9, 77, 3), CURRENT),
    ("17-streams-metadata-4.1", StreamsGroupMetadata(G, 9, 77, -1), CURRENT),
    ("18-streams-topics", GroupTopicMetadata(G, STREAMS, TOPICS), CURRENT),
    ("19-streams-member", streams_member(UserEndpoint("app-host", 65_000)), CURRENT),
    ("19-streams-member-no-endpoint", streams_member(None), CURRENT),
    ("20-streams-target-metadata", TargetAssignmentMetadata(G, STREAMS, 9, 5), CURRENT),
    ("21-streams-target", StreamsTargetAssignment(G, M, TASKS), CURRENT),
    ("22-streams-current", StreamsCurrentAssignment(G, M, 9, 8, 2, TASKS, StreamsTasks(warmup=TASKS.active)), CURRENT),
    ("23-streams-topology", TOPOLOGY, CURRENT),
    ("24-streams-resolved-topic-ids", StreamsResolvedTopicIds(G, 9, (
        SubtopologyTopicIds("0", (ORDERS,)), SubtopologyTopicIds("1", (ORDERS, PAYMENTS)),
    )), CURRENT),
]


def encoded_samples() -> list[tuple[bytes, bytes]]:
    return [encode(record, layout) for _, record, layout in SAMPLES]
