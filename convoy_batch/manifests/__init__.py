"""What a manifest means before anything renders or applies it: its YAML, read with
Kubernetes' limits (:mod:`.yamlload`), its annotations, convoy's own and Argo CD's and
Flux's (:mod:`.annotations`), the drift rules that leave paths to other managers
(:mod:`.drift`), a SOPS-encrypted document sealed (:mod:`.sealed`), and a source file's
text, its variables substituted and its documents parsed (:mod:`.text`). Pure: no I/O."""
