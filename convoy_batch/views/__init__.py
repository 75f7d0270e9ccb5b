"""Read-only views for the command line: a Release's status row and ``plan``
(:mod:`.inspect`), ``diff`` and its report (:mod:`.diff`, :mod:`.diff_report`), and
``history`` (:mod:`.history`). They change nothing: no commit, apply or store write."""
