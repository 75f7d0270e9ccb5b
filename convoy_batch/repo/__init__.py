"""Reading the GitOps repository and the sources its Releases point at, committed content
only (SPEC 1, 3): Releases and Clusters at HEAD (:mod:`.gitops`), the records a reading
gives (:mod:`.entries`), the members of each ReleaseSet (:mod:`.members`), each
Release's source files, revisions and exports (:mod:`.source`), and the last change of a
source's path, remembered across ticks (:mod:`.changes`). Does git I/O; writes nothing
to git (the status commits and the remote: :mod:`convoy_batch.status`)."""
