"""One Release's reconcile, below :mod:`convoy_batch.reconcile`: the tick's context read
once and shared by every Release (:mod:`.tick`, which also states what is whose, the
threading rule and every cache), which Release owns each object (:mod:`.ownership`), and
the stages of SPEC 4 (:mod:`.stages`). Does I/O through the tick's stores and deployers."""
