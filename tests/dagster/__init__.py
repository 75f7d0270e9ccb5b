"""The Dagster layer: definitions, instances, dagster dev and the UI."""
