"""The one catalogue of kmon's metric names.

The exporter, the alert rules, the dashboards and the README are all checked against
this list by tests, so a metric is renamed here or nowhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter"]
PREFIX = "kmon_"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    type: MetricType
    labels: tuple[str, ...]  # besides "cluster", which every series carries
    help: str
    family: str  # the view family that computes it (streaming/views/<family>.py), or "collector"
    # exported for KRaft clusters only: a ZooKeeper-mode cluster has no quorum, fencing or ELR
    kraft_only: bool = False

    @property
    def all_labels(self) -> tuple[str, ...]:
        return ("cluster",) + self.labels


def _m(name: str, type_: MetricType, labels: tuple[str, ...], help_: str, family: str,
       kraft_only: bool = False) -> MetricSpec:
    return MetricSpec(PREFIX + name, type_, labels, help_, family, kraft_only)


# a group's type (the rebalance protocol it runs) -> the states Kafka gives it, as kmon exports them
GROUP_STATES: dict[str, tuple[str, ...]] = {
    "classic": ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"),
    "consumer": ("Empty", "Assigning", "Reconciling", "Stable", "Dead"),       # KIP-848
    "share": ("Empty", "Stable", "Dead"),                                       # KIP-932
    "streams": ("Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"),   # KIP-1071
}
# the verdicts on a group's consumers (collectors/groups/consumer_status.py), from good to worst
CONSUMER_STATUSES = ("ok", "falling_behind", "rewound", "stopped", "stalled")

CATALOG: tuple[MetricSpec, ...] = (
    # controller family
    _m("controller_id", "gauge", (), "Id of the active controller (KRaft: the quorum leader), -1 if none.",
       "controller"),
    _m("controller_epoch", "gauge", (), "Value of /controller_epoch (KRaft: the quorum leader's raft epoch).",
       "controller"),
    _m("active_controller_count", "gauge", (),
       "1 if a controller is registered (KRaft: the quorum has a leader), else 0.", "controller"),
    _m("controller_changes_total", "counter", (),
       "Observed changes of the active controller, including to none.", "controller"),
    # KRaft's metadata quorum (the controllers), as its leader describes it
    _m("quorum_leader_id", "gauge", (), "Node id of the metadata quorum's leader (the active controller), -1 if none.",
       "quorum", kraft_only=True),
    _m("quorum_epoch", "gauge", (), "Raft epoch of the metadata quorum.", "quorum", kraft_only=True),
    _m("quorum_high_watermark", "gauge", (),
       "High watermark of the metadata log (__cluster_metadata): records below it are committed.", "quorum",
       kraft_only=True),
    _m("quorum_voters", "gauge", (), "Voters of the metadata quorum (the controllers).", "quorum", kraft_only=True),
    _m("quorum_observers", "gauge", (),
       "Observers of the metadata quorum the leader knows (brokers following the metadata log).", "quorum",
       kraft_only=True),
    _m("quorum_voter_lag_records", "gauge", ("voter",),
       "Records a voter is behind the high watermark, +Inf if the leader has not heard from it.", "quorum",
       kraft_only=True),
    _m("quorum_voter_lag_seconds", "gauge", ("voter",),
       "Seconds since a voter last caught up with the leader, +Inf if the leader has not heard from it.", "quorum",
       kraft_only=True),
    _m("metadata_version", "gauge", (), "The cluster's finalized metadata.version feature level.", "quorum",
       kraft_only=True),
    _m("feature_level", "gauge", ("feature",),
       "A finalized feature level of the cluster, as the metadata log says it (metadata.version, kraft.version, "
       "group.version, share.version, streams.version, transaction.version, eligible.leader.replicas.version, ...): "
       "0 is off; group.version 0 leaves the consumer group protocol (KIP-848) off.", "quorum", kraft_only=True),
    # brokers family
    _m("brokers", "gauge", (), "Registered brokers that serve (alive; KRaft: and not fenced).", "brokers"),
    _m("broker_up", "gauge", ("broker",),
       "1 if registered and serving, 0 if it holds replicas but is not registered (KRaft: or is fenced).",
       "brokers"),
    _m("broker_info", "gauge", ("broker", "host", "port", "rack"),
       "Broker registration details (value is always 1).", "brokers"),
    _m("broker_fenced", "gauge", ("broker",),
       "1 if the broker is registered but fenced: not serving (no heartbeat within its session, stopped, or "
       "not caught up with the metadata log yet), else 0.", "brokers", kraft_only=True),
    _m("brokers_in_controlled_shutdown", "gauge", (),
       "Registered brokers in a controlled shutdown, not fenced yet: their leaders are moving away.", "brokers",
       kraft_only=True),
    # ISR family
    _m("partitions", "gauge", ("topic",), "Partitions of the topic.", "isr"),
    _m("under_replicated_partitions", "gauge", ("topic",),
       "Partitions whose ISR is smaller than the assigned replicas.", "isr"),
    _m("under_min_isr_partitions", "gauge", ("topic",),
       "Partitions whose ISR is below min(min.insync.replicas, replication factor).", "isr"),
    _m("at_min_isr_partitions", "gauge", ("topic",),
       "Partitions whose ISR equals min(min.insync.replicas, replication factor).", "isr"),
    _m("offline_partitions", "gauge", ("topic",),
       "Partitions without a live leader (none, or one not registered; KRaft: or fenced).", "isr"),
    _m("isr_shrinks_total", "counter", ("topic", "broker"), "A broker left a partition's ISR.", "isr"),
    _m("isr_expands_total", "counter", ("topic", "broker"), "A broker joined a partition's ISR.", "isr"),
    _m("leader_elections_total", "counter", ("topic",), "Partition leader changes.", "isr"),
    _m("unclean_leader_elections_total", "counter", ("topic",),
       "Leader changes to a replica that was not in the previous ISR (KRaft: nor an eligible leader replica, "
       "or into leader recovery).", "isr"),
    _m("elr_leader_elections_total", "counter", ("topic",),
       "Leader changes to an eligible leader replica outside the previous ISR (KIP-966): clean, no data lost.",
       "isr", kraft_only=True),
    _m("elr_partitions", "gauge", ("topic",),
       "Partitions with eligible leader replicas outside the ISR (KIP-966): replicas that left an ISR below "
       "min.insync.replicas and can still be elected without data loss.", "isr", kraft_only=True),
    _m("partition_isr_size", "gauge", ("topic", "partition"),
       "ISR size of a partition (only partitions that are not fully healthy, by default).", "isr"),
    _m("partition_replicas", "gauge", ("topic", "partition"),
       "Assigned replicas of a partition (same selection as kmon_partition_isr_size).", "isr"),
    _m("partition_leader", "gauge", ("topic", "partition"),
       "Leader broker id of a partition, -1 if none (same selection as kmon_partition_isr_size).", "isr"),
    # leader balance family
    _m("broker_leader_partitions", "gauge", ("broker",), "Partitions this broker leads.", "balance"),
    _m("broker_preferred_leader_partitions", "gauge", ("broker",),
       "Partitions whose first assigned replica is this broker.", "balance"),
    _m("broker_leader_imbalance_ratio", "gauge", ("broker",),
       "Of the partitions this broker should lead, the share led by another (Kafka's auto-rebalance ratio).", "balance"),
    _m("preferred_replica_imbalance", "gauge", (),
       "Partitions whose leader is not the first assigned replica (Kafka's rule, incl. its reassignment exception).", "balance"),
    _m("broker_replica_partitions", "gauge", ("broker",), "Replicas hosted per broker.", "balance"),
    _m("reassigning_partitions", "gauge", (), "Partitions under reassignment.", "balance"),
    _m("reassignment_replicas_pending", "gauge", (),
       "Replicas being added by reassignments that have not joined their partition's ISR yet (still copying).",
       "balance"),
    # consumer groups family
    # (type: classic, consumer, share or streams: the rebalance protocol the group runs)
    _m("consumer_group_state", "gauge", ("group", "type", "state"),
       "1 for the group's current state, 0 for the others of its type.", "groups"),
    _m("consumer_group_members", "gauge", ("group", "type"), "Members of the group.", "groups"),
    _m("consumer_group_generation", "gauge", ("group", "type"),
       "Generation of a classic group; the group epoch of a consumer, share or streams group.", "groups"),
    _m("consumer_group_rebalances_total", "counter", ("group", "type"),
       "Completed rebalances: generation steps (consumer, share, streams: group epoch steps), none missed "
       "between polls.", "groups"),
    _m("consumer_group_state_seconds", "gauge", ("group", "type"), "Seconds in the current state.", "groups"),
    _m("consumer_group_info", "gauge", ("group", "type", "assignor"),
       "The group's assignor (classic: the protocol its leader chose; consumer, share, streams: the server-side "
       "assignor its members asked for, \"default\" for the coordinator's own); the value is always 1.", "groups"),
    _m("consumer_group_assignment_epoch", "gauge", ("group", "type"),
       "Epoch of the target assignment the members reconcile to: behind the group epoch while the group is "
       "Assigning. Consumer, share and streams groups only.", "groups"),
    _m("consumer_group_reconciling_members", "gauge", ("group", "type"),
       "Members that have not reconciled with the target assignment yet (still revoking or waiting for "
       "partitions). Consumer, share and streams groups only.", "groups"),
    _m("consumer_group_status", "gauge", ("group", "type", "status"),
       "1 for the verdict on the group's consumers from their committed and end offsets over a sliding window "
       "(ok, falling_behind, rewound, stopped, stalled: its worst partition's), 0 for the others; absent until "
       "judged.", "groups"),
    _m("consumer_group_partition_status", "gauge", ("group", "type", "topic", "partition", "status"),
       "1 for each partition of the group whose consumer is not ok, with the verdict on it.", "groups"),
    _m("consumer_group_lag", "gauge", ("group", "type", "topic"),
       "Messages behind the end offsets (share groups: the share-partitions' start offsets).", "groups"),
    _m("consumer_group_lag_seconds", "gauge", ("group", "type", "topic", "method"),
       "Time behind: the age of the oldest unread record, read from the topic (method=record), or where kmon "
       "may not read it, interpolated from (end offset, time) samples (method=interpolated); 0 when caught up.",
       "groups"),
    _m("consumer_group_lost_messages_total", "counter", ("group", "type", "topic"),
       "Records the group had not read that retention or DeleteRecords deleted: how far each partition's log "
       "start offset passed the group's committed offset, as kmon saw them (history kind records_lost).",
       "groups"),
    _m("consumer_group_retention_used_ratio", "gauge", ("group", "type", "topic"),
       "The oldest unread record's age over the topic's retention.ms: at 1, retention deletes records the group has "
       "not read (time-based retention; absent for a topic kept forever or whose config kmon may not read).",
       "groups"),
    # the monitor itself (streaming app)
    _m("events_total", "counter", ("source", "kind"), "Events applied to the views.", "self"),
    _m("malformed_total", "counter", ("source",), "Events that could not be parsed or applied.", "self"),
    _m("last_event_timestamp_seconds", "gauge", ("source",),
       "Observation time of the newest event applied, per source.", "self"),
    _m("event_delay_seconds", "gauge", (),
       "Delay from a change being observed by a collector to the view being exported (latest batch).", "self"),
    _m("stream_batch_duration_seconds", "gauge", (), "Duration of the latest micro-batch.", "self"),
    _m("stream_input_rows_total", "counter", (), "Rows read from the events topic.", "self"),
    _m("stream_state_rows", "gauge", (), "Entities held in the view state.", "self"),
    _m("history_rows_total", "counter", (), "Transitions written to the history (kmon history).", "self"),
    _m("history_lost_rows_total", "counter", (),
       "Transitions that could not be written to the history (logged with the file).", "self"),
    _m("view_errors_total", "counter", ("family",),
       "Builds (one per micro-batch that changed its cluster) where this view family failed: its metrics are left out until it builds again, the others served (logged).", "self"),
    # the collectors' own /metrics
    _m("collector_events_total", "counter", ("source", "kind"), "Events emitted.", "collector"),
    _m("collector_malformed_total", "counter", ("source", "kind"),
       "Znodes or records that could not be parsed or applied (logged with their path or offset; KRaft kind "
       "unmatched_*: a change of a broker or partition the collector does not hold).", "collector"),
    _m("collector_resyncs_total", "counter", ("source",),
       "Snapshots (full re-reads) completed: at start and after every reconnect or session expiry.", "collector"),
    _m("collector_zk_reads_total", "counter", (), "ZooKeeper reads (get/get_children/exists).", "collector"),
    _m("collector_watches", "gauge", (), "ZooKeeper watches currently held.", "collector"),
    _m("collector_zk_connected", "gauge", (), "1 while the ZooKeeper session is connected.", "collector"),
    _m("collector_metadata_offset", "gauge", (),
       "KRaft: the next metadata offset the collector reads (every record before it is folded).", "collector",
       kraft_only=True),
    _m("collector_sampled_missed_total", "counter", ("source", "kind"),
       "KRaft sampled mode: steps the epochs prove happened between two samples of the brokers' metadata, "
       "never seen as events (kind: leader_election, controller_change).", "collector", kraft_only=True),
    _m("collector_metadata_lag_records", "gauge", (),
       "KRaft: committed metadata records the collector has not read yet (the high watermark minus its offset).",
       "collector", kraft_only=True),
    _m("collector_broker_reachable", "gauge", ("broker",),
       "1 while the broker answers kmon's probe (an ApiVersions request on one of its listeners, every second), "
       "0 once it refused, reset or stayed silent past the probe's timeout: unreachable from kmon, which is not "
       "yet dead to Kafka. Probed by the ZooKeeper and KRaft collectors, for every registered broker.", "collector"),
    _m("collector_broker_probe_seconds", "gauge", ("broker",),
       "Seconds the latest probe of the broker took, answered or not.", "collector"),
    _m("collector_admin_calls_total", "counter", ("call",), "Kafka Admin API calls made.", "collector"),
    _m("collector_poll_duration_seconds", "gauge", (), "Duration of the latest group poll cycle.", "collector"),
    _m("collector_end_offsets_unknown", "gauge", (),
       "Partitions with committed offsets whose end offset the latest poll could not read (their lag is left out; logged).", "collector"),
    _m("collector_producer_errors_total", "counter", (), "Events the producer failed to deliver (retried).", "collector"),
    _m("collector_errors_total", "counter", ("source",),
       "Unexpected errors a collector's loop went on after (each logged with its trace: a defect to report); "
       "/healthz says the latest for a minute.", "collector"),
    _m("collector_buffered_events", "gauge", (), "Events waiting for the events cluster.", "collector"),
    _m("collector_dropped_events_total", "counter", (),
       "Events dropped because the bounded buffer was full (a resync follows).", "collector"),
    _m("collector_last_event_timestamp_seconds", "gauge", ("source",),
       "When the newest event was emitted.", "collector"),
    _m("collector_events_on_monitored_cluster", "gauge", (),
       "1 when the events cluster is the monitored cluster itself (same cluster id), so kmon's events wait "
       "for that cluster's failovers; 0 when it is another cluster or not known yet.", "collector"),
)

BY_NAME: dict[str, MetricSpec] = {m.name: m for m in CATALOG}


def exposed_names(spec: MetricSpec) -> tuple[str, ...]:
    """Series names a spec produces on /metrics (counters gain _created in the text format)."""
    if spec.type == "counter":
        return (spec.name, spec.name.removesuffix("_total") + "_created")
    return (spec.name,)


def known_series_names() -> frozenset[str]:
    return frozenset(n for m in CATALOG for n in exposed_names(m))


def markdown_table() -> str:
    """The README's metric reference (`python -m kmon.metrics` prints it; a test compares)."""
    rows = ["| metric | type | labels (besides cluster) | family | meaning |", "|---|---|---|---|---|"]
    rows += [f"| `{m.name}` | {m.type} | {', '.join(m.labels) or '—'} | {m.family} | "
             f"{m.help}{' KRaft only.' if m.kraft_only else ''} |" for m in CATALOG]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
