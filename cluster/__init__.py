"""The `kubeling` command: `up`, `down`, `status` and `image`, on top of every component.

A whole cluster on this machine as supervised processes: etcd, the apiserver, the
scheduler and N kubelets (node-1..N, each with its own CRI socket, pod CIDR and bridge),
all on loopback with free ports. Everything lives under the state dir (default
~/.kubeling): `cluster.json` (what runs where), `kubeconfig`, `logs/<component>.log`,
etcd's data, the kubelets' state.

Modules: `plan` (ports, names, command lines), `supervisor` (start in order, wait for
health, restart with back-off), `processes` (pids we started, found again after the
supervisor is gone), `cleanup` (what a stopped node's pods left), `preflight` (what the
machine must have), `commands` (the subcommands). This package is the top of the import
graph: nothing imports it.
"""
