"""The local stack, a harness: a real Kafka cluster (ZooKeeper and brokers in ZooKeeper mode, or KRaft
nodes of Kafka 4), kmon's events node, Prometheus and Alertmanager as local processes, for `kmon run`,
the tests and the benches.
Production code (collectors/, streaming/) needs nothing from it."""
