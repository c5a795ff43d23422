"""libcni for Python and the kubelet's network plugin manager: not built yet, see the issues."""
