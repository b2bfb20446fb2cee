"""Collectors: watch a Kafka cluster and publish state-carrying events (kmon.events)."""
