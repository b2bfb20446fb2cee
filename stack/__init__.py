"""The local stack, a harness: real ZooKeeper, Kafka brokers (ZooKeeper mode), kmon's events
node, Prometheus and Alertmanager as local processes, for `kmon run`, the tests and the benches.
Production code (collectors/, streaming/) needs nothing from it."""
