"""The network policy controller: NetworkPolicies as iptables rules and ipsets on each node."""
