"""Grafana dashboards as JSON, and their provisioning through the Grafana HTTP API."""
