"""The Dagster layer: definitions, instances, dg dev and dg launch, the UI."""
