"""kubeling's controller manager (kube-controller-manager's subset): `python -m controllers`.

One process runs every controller over shared informers (one per resource), leader-
elected on the kube-system/kube-controller-manager Lease as upstream, so that with
several replicas exactly one acts. Modules: `manager` (informers, election, the
controllers' lifecycle), `nodelifecycle` (nodes whose kubelet went silent: Ready=Unknown,
the unreachable/not-ready taints, pods marked not ready), `tainteviction` (pods on nodes
with NoExecute taints they do not tolerate are deleted, after their tolerationSeconds).
"""
