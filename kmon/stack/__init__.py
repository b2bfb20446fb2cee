"""The local stack: real ZooKeeper, Kafka brokers (ZooKeeper mode), Prometheus and
Alertmanager as local processes, for the embedded default and for the tests."""
