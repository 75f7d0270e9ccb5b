"""A tick over many Releases, above :mod:`convoy_batch.reconcile`: what is due and the tick
itself (:mod:`.runner`), the tick sharded over worker processes by Cluster
(:mod:`.shards`, ``reconcile --jobs``), and the wake-ups between ticks for the Dagster
sensor (:mod:`.wakeups`). Does I/O."""
