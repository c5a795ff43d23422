"""kubeling's metrics server (what metrics-server is for upstream): `metrics.k8s.io/v1beta1`
NodeMetrics and PodMetrics from the kubelets' Summary API, served over TLS behind the
apiserver's aggregator (an APIService), trusting only the aggregator's front-proxy
certificate and the user it names in headers."""
