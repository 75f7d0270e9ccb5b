"""A tick through the CLI on the directory cluster: reconcile, deletion, drift, sets."""
