"""Streaming: the Spark app that keeps the live views and exports them to Prometheus."""
