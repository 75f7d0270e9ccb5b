"""The pure decisions (convoy_batch/rollout/) and the models they read."""
