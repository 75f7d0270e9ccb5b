"""The status files and their commits (SPEC 10), and the remote they go to: the status
text, ruamel.yaml round trip with comments kept (:mod:`.text`), the statuses at HEAD and a
tick's batch of commits (:mod:`.store`), the commits written by git itself
(:mod:`.gitwrite`), the push with fetch, replay and retry (:mod:`.push`), and the
repository as a clone of ``$CONVOY_REPO_URL`` for a run in a pod: fetch before a tick,
the unpushed bundle after it (:mod:`.remote`). Does git I/O."""
