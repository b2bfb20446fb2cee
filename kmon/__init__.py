"""kmon's ground floor: the contract every other package stands on (the event schema and its
codec, the metric catalogue, the history row and its counted transitions, flags, client
properties, logs, HTTP, reachability, signals). It imports nothing above it.

Data flow: collectors/ (ZooKeeper, KRaft's metadata log, consumer groups) -> events topic (schema: kmon.events)
-> streaming/ (Spark views) -> Prometheus exporter (names: kmon.metrics) -> dashboards/, alerts.
Beside them: stack/ (the local stack, a harness) and cli/ (the roof: the kmon command).
"""

__version__ = "0.1.0"
