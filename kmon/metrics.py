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
    view: str  # which view (or process) computes it

    @property
    def all_labels(self) -> tuple[str, ...]:
        return ("cluster",) + self.labels


def _m(name: str, type_: MetricType, labels: tuple[str, ...], view: str, help_: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, type_, labels, help_, view)


GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead",
                "Assigning", "Reconciling")

CATALOG: tuple[MetricSpec, ...] = (
    # controller view
    _m("controller_id", "gauge", (), "controller", "Broker id of the active controller, -1 if none."),
    _m("controller_epoch", "gauge", (), "controller", "Value of /controller_epoch."),
    _m("active_controller_count", "gauge", (), "controller", "1 if a controller is registered, else 0."),
    _m("controller_changes_total", "counter", (), "controller",
       "Observed changes of the active controller, including to none."),
    # brokers view
    _m("brokers", "gauge", (), "brokers", "Registered (alive) brokers."),
    _m("broker_up", "gauge", ("broker",), "brokers",
       "1 if registered, 0 if it holds replicas but is not registered."),
    _m("broker_info", "gauge", ("broker", "host", "port", "rack"), "brokers",
       "Broker registration details (value is always 1)."),
    # ISR view
    _m("partitions", "gauge", ("topic",), "isr", "Partitions of the topic."),
    _m("under_replicated_partitions", "gauge", ("topic",), "isr",
       "Partitions whose ISR is smaller than the assigned replicas."),
    _m("under_min_isr_partitions", "gauge", ("topic",), "isr",
       "Partitions whose ISR is below min(min.insync.replicas, replication factor)."),
    _m("at_min_isr_partitions", "gauge", ("topic",), "isr",
       "Partitions whose ISR equals min(min.insync.replicas, replication factor)."),
    _m("offline_partitions", "gauge", ("topic",), "isr", "Partitions without a live leader."),
    _m("isr_shrinks_total", "counter", ("topic", "broker"), "isr", "A broker left a partition's ISR."),
    _m("isr_expands_total", "counter", ("topic", "broker"), "isr", "A broker joined a partition's ISR."),
    _m("leader_elections_total", "counter", ("topic",), "isr", "Partition leader changes."),
    _m("unclean_leader_elections_total", "counter", ("topic",), "isr",
       "Leader changes to a replica that was not in the previous ISR."),
    _m("partition_isr_size", "gauge", ("topic", "partition"), "isr",
       "ISR size of a partition (only partitions that are not fully healthy, by default)."),
    _m("partition_replicas", "gauge", ("topic", "partition"), "isr",
       "Assigned replicas of a partition (same selection as kmon_partition_isr_size)."),
    _m("partition_leader", "gauge", ("topic", "partition"), "isr",
       "Leader broker id of a partition, -1 if none (same selection as kmon_partition_isr_size)."),
    # leader balance view
    _m("broker_leader_partitions", "gauge", ("broker",), "balance", "Partitions this broker leads."),
    _m("broker_preferred_leader_partitions", "gauge", ("broker",), "balance",
       "Partitions whose first assigned replica is this broker."),
    _m("broker_leader_imbalance_ratio", "gauge", ("broker",), "balance",
       "Of the partitions this broker should lead, the share led by another (Kafka's auto-rebalance ratio)."),
    _m("preferred_replica_imbalance", "gauge", (), "balance",
       "Partitions whose leader is not the first assigned replica (Kafka's rule, incl. its reassignment exception)."),
    _m("broker_replica_partitions", "gauge", ("broker",), "balance", "Replicas hosted per broker."),
    _m("reassigning_partitions", "gauge", (), "balance", "Partitions under reassignment."),
    # consumer groups view
    _m("consumer_group_state", "gauge", ("group", "state"), "groups",
       "1 for the group's current state, 0 for the others."),
    _m("consumer_group_members", "gauge", ("group",), "groups", "Members of the group."),
    _m("consumer_group_generation", "gauge", ("group",), "groups", "Generation (epoch) of the group."),
    _m("consumer_group_rebalances_total", "counter", ("group",), "groups",
       "Completed rebalances (generation steps, none missed between polls)."),
    _m("consumer_group_state_seconds", "gauge", ("group",), "groups", "Seconds in the current state."),
    _m("consumer_group_lag", "gauge", ("group", "topic"), "groups", "Messages behind the end offsets."),
    _m("consumer_group_lag_seconds", "gauge", ("group", "topic"), "groups",
       "Time behind, estimated from (end offset, time) samples."),
    # the monitor itself (streaming app)
    _m("events_total", "counter", ("source", "kind"), "self", "Events applied to the views."),
    _m("malformed_total", "counter", ("source",), "self", "Events that could not be parsed or applied."),
    _m("last_event_timestamp_seconds", "gauge", ("source",), "self",
       "Observation time of the newest event applied, per source."),
    _m("event_delay_seconds", "gauge", (), "self",
       "Delay from a change being observed by a collector to the view being exported (latest batch)."),
    _m("stream_batch_duration_seconds", "gauge", (), "self", "Duration of the latest micro-batch."),
    _m("stream_input_rows_total", "counter", (), "self", "Rows read from the events topic."),
    _m("stream_state_rows", "gauge", (), "self", "Entities held in the view state."),
    _m("history_rows_total", "counter", (), "self", "Transitions written to the history (kmon history)."),
    _m("history_lost_rows_total", "counter", (), "self",
       "Transitions that could not be written to the history (logged with the file)."),
    _m("view_errors_total", "counter", ("family",), "self",
       "Builds (one per micro-batch that changed its cluster) where this view family failed: its metrics are left out until it builds again, the others served (logged)."),
    # the collectors' own /metrics
    _m("collector_events_total", "counter", ("source", "kind"), "collector", "Events emitted."),
    _m("collector_malformed_total", "counter", ("source", "kind"), "collector",
       "Znodes or records that could not be parsed (logged with their path or offset)."),
    _m("collector_resyncs_total", "counter", ("source",), "collector",
       "Snapshots (full re-reads) completed: at start and after every reconnect or session expiry."),
    _m("collector_zk_reads_total", "counter", (), "collector", "ZooKeeper reads (get/get_children/exists)."),
    _m("collector_watches", "gauge", (), "collector", "ZooKeeper watches currently held."),
    _m("collector_zk_connected", "gauge", (), "collector", "1 while the ZooKeeper session is connected."),
    _m("collector_admin_calls_total", "counter", ("call",), "collector", "Kafka Admin API calls made."),
    _m("collector_poll_duration_seconds", "gauge", (), "collector", "Duration of the latest group poll cycle."),
    _m("collector_end_offsets_unknown", "gauge", (), "collector",
       "Partitions with committed offsets whose end offset the latest poll could not read (their lag is left out; logged)."),
    _m("collector_producer_errors_total", "counter", (), "collector", "Events the producer failed to deliver (retried)."),
    _m("collector_buffered_events", "gauge", (), "collector", "Events waiting for the events cluster."),
    _m("collector_dropped_events_total", "counter", (), "collector",
       "Events dropped because the bounded buffer was full (a resync follows)."),
    _m("collector_last_event_timestamp_seconds", "gauge", ("source",), "collector",
       "When the newest event was emitted."),
    _m("collector_events_on_monitored_cluster", "gauge", (), "collector",
       "1 when the events cluster is the monitored cluster itself (same cluster id), so kmon's events wait "
       "for that cluster's failovers; 0 when it is another cluster or not known yet."),
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
    rows = ["| metric | type | labels (besides cluster) | view | meaning |", "|---|---|---|---|---|"]
    rows += [f"| `{m.name}` | {m.type} | {', '.join(m.labels) or '—'} | {m.view} | {m.help} |" for m in CATALOG]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
