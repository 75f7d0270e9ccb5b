"""The named steps of a reconcile (SPEC 4), one module each: render (:mod:`.render`),
the gates (:mod:`.gates`), the sync (:mod:`.sync`) with its namespace
(:mod:`.namespace`), hooks (:mod:`.hooks`) and drift (:mod:`.drift`), the rollback to
the last healthy render (:mod:`.last_healthy`), the one executor of a decided step
(:mod:`.act`) and its inventory (:mod:`.inventory`), an error's outcome
(:mod:`.outcome`), and verification's measurements (:mod:`.verify`). After the render,
each takes the Release's run (:class:`~convoy_batch.engine.run.ReleaseRun`) and what the
step before it made, not the tick."""
