"""The ingress controller: Ingresses served by HAProxy (Debian's), programmed from the API."""
