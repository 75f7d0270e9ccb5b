"""The named steps of a reconcile (SPEC 4), one module each."""
