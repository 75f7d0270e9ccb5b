"""One Release's reconcile, below :mod:`convoy_batch.reconcile`: the tick's context read
once and shared by every Release (:mod:`.tick`, which also states what is whose, the
threading rule and every cache), which Release owns each object (:mod:`.ownership`), and
the stages of SPEC 4 (:mod:`.stages`), the status an outcome gives and its commit
(:mod:`.handler`), a removed Release's retirement (:mod:`.retire`) and a ReleaseSet's own
status file (:mod:`.setstatus`). Does I/O through the tick's stores and deployers."""
