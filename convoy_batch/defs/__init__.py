"""The Dagster modules beside :mod:`convoy_batch.definitions` and :mod:`convoy_batch.assets`
(``dg``'s layout: ``<root>/definitions.py`` and a ``<root>/defs/`` package): the job
``convoy_sharded_tick``, a tick sharded by Cluster as Dagster ops (:mod:`.sharded`).

The definitions name what they use from here (no ``load_from_defs_folder``).
"""
