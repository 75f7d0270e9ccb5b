"""The keys of a Release's status file (SPEC 10) in the order they are written. The status
model's dump and the status store's files are both checked against this one list, so the
order is spelled out once, by hand, rather than read back from the code under test."""

STATUS_KEYS = [
    "rollout",
    "lastAttempted",
    "lastSuccessful",
    "lastHealthy",
    "waves",
    "history",
    "conditions",
    "lastHandledForceSyncAt",
]
"""Every top-level key of a full status, in the order of the file."""
