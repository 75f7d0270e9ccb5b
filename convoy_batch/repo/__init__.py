"""Reading the GitOps repository and the sources its Releases point at, committed content
only (SPEC 1, 3): Releases and Clusters at HEAD (:mod:`.gitops`), each Release's source
files, revisions and exports (:mod:`.source`), and the repository as a clone of
``$CONVOY_REPO_URL`` for a run in a pod (:mod:`.clone`). Does git I/O."""
