"""kube-proxy: Services' ClusterIPs and node ports as iptables rules on each node."""
