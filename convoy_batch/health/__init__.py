"""Health (SPEC 11): the built-in rules in kstatus's order (:mod:`.builtin`), the
Releases' and Clusters' CEL rules (:mod:`.cel`), and the observer that reads each
inventory object from its cluster and writes its health (:mod:`.observer`, the one module
here that does I/O, through a deployer)."""
