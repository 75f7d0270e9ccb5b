"""A tick over many Releases, above :mod:`convoy_batch.reconcile`: the tick itself
(:mod:`.runner`), what it is asked and what it reports (:mod:`.options`), why a Release
is due (:mod:`.due`), what it does once its Releases are handled: render GC and push
(:mod:`.finish`), the tick sharded over worker processes by Cluster
(:mod:`.shards`, ``reconcile --jobs``), the wake-ups between ticks for the Dagster
sensor (:mod:`.wakeups`), and where the state directory is when none is named
(:mod:`.location`, read by the command line and the Dagster resource). Does I/O."""
