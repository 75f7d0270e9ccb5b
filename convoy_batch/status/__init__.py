"""The status files and their commits (SPEC 10): the status text, ruamel.yaml round
trip with comments kept (:mod:`.text`), the statuses at HEAD and a tick's batch of commits
(:mod:`.store`), the commits written by git itself (:mod:`.gitwrite`), and the push with
fetch, replay and retry (:mod:`.push`). Does git I/O."""
