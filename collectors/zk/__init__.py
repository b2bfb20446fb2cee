"""ZooKeeper collector: watches Kafka's ZooKeeper tree and turns znode changes into kmon events."""
