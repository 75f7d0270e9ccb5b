"""What a manifest means before anything renders or applies it: its YAML, read with
Kubernetes' limits (:mod:`.yamlload`), and its annotations, convoy's own and Argo CD's and
Flux's (:mod:`.annotations`). Pure: no I/O."""
