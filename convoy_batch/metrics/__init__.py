"""Measurements for a render's verification (README "Verification"): each analysis's
provider fetches a result, which the CEL conditions judge, or makes a measurement of its
own. Does network I/O (and the ``job`` provider's through a deployer); the pure decisions
are in :mod:`convoy_batch.rollout.analysis`.

- :mod:`.base`: the ``Provider`` protocol, what a provider is given and what it raises
- :mod:`.providers`: every provider by the model of its metric, the one place of each
- :mod:`.web`: the ``web`` provider, and the HTTP request and credentials of every provider
- :mod:`.prometheus`: the ``prometheus`` provider, an instant query
- :mod:`.job`: the ``job`` provider, a Job of the source applied once per render
- :mod:`.judge`: a result judged by the analysis's CEL conditions
"""
