"""The state directory's machinery (SPEC 2) beside the stores of :mod:`convoy_batch.store`:
atomic writes, its checks and the background writer (:mod:`.files`), every file lock
(:mod:`.locks`), the tick records,
health journal and parse caches that only save work (:mod:`.caches`), the write-ahead
records of decided steps (:mod:`.intents`), verification's measurements
(:mod:`.measurements`), and the operator's files outside the repository
(:mod:`.operator_files`). Does file I/O."""
