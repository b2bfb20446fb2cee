"""kmon: live, alertable state of Apache Kafka's control plane.

Data flow: collectors/ (ZooKeeper, consumer groups) -> events topic (schema: kmon.events)
-> streaming/ (Spark views) -> Prometheus exporter (names: kmon.metrics) -> dashboards/, alerts.
"""
