"""One Release's reconcile, below :mod:`convoy_batch.reconcile`: the tick's context read
once (:mod:`.tick`, which also states what is whose and every cache), what its Releases
share across threads (:mod:`.shared`, whose docstring is the threading rule), one
Release's reconcile as a value (:mod:`.run`), which Release owns each object
(:mod:`.ownership`), and the stages of SPEC 4 (:mod:`.stages`), the status an outcome
gives and its commit (:mod:`.handler`), a removed Release's retirement (:mod:`.retire`;
what the history says of the removed Releases: :mod:`.removed`) and a ReleaseSet's own
status file (:mod:`.setstatus`). Does I/O through the tick's stores and deployers."""
