"""Deployers: where rendered objects go (SPEC 12). One protocol (:mod:`.base`), and the
one place a deployer is built (:mod:`.factory`):

- the directory cluster, a file per object (:mod:`.directory`), and its simulated
  controllers (:mod:`.simulated`);
- the Kubernetes cluster (:mod:`.kubernetes`): its HTTP transport and discovery
  (:mod:`.kubeapi`), its kubeconfig (:mod:`.kubeconfig`), its pure rules
  (:mod:`.kubediff`), and whether a live object already is what the server would store
  (:mod:`.serverform`);
- where a Cluster's target may be, checked before a deployer is built (:mod:`.targets`).
"""

from convoy_batch.deployers.base import Deployer, Manifest

__all__ = ["Deployer", "Manifest"]
