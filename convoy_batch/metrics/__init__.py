"""Measurements for a render's verification (README "Verification"): the providers that
fetch a result (:mod:`.web`) and the CEL conditions that judge it (:mod:`.judge`).
Does network I/O; the pure decisions are in :mod:`convoy_batch.rollout.analysis`."""
