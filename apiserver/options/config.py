"""The apiserver's settings, each declared once with its flag (`python -m apiserver --help`
lists them; docs/flags.md is generated from the parser)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from apiserver.auth.authorization import parse_modes
from apiserver.auth.tokens import DEFAULT_ISSUER
from kubeling.netutil import cidr_arg, host_port_arg, ip_arg, optional_host_port_arg
from kubeling.options import boolean, flag

__all__ = ["Config", "ADMISSION_PLUGINS"]

ADMISSION_PLUGINS = ("LimitRanger", "NodeRestriction", "ServiceAccount", "DefaultTolerationSeconds", "Priority",
                     "PodSecurity", "RuntimeClass",
                     "DefaultStorageClass", "StorageObjectInUseProtection", "PersistentVolumeClaimResize",
                     "DefaultIngressClass", "CertificateApproval", "CertificateSigning",
                     "CertificateSubjectRestriction",
                     "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook",
                     "ResourceQuota")


def _endpoints(text: str) -> str:
    for part in text.split(","):
        host_port_arg(part.strip())
    return text


def _modes(text: str) -> str:
    try:
        parse_modes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text



@dataclass
class Config:
    etcd: str = flag("127.0.0.1:2379", "etcd client endpoint HOST:PORT, or every member's, comma-separated (the "
                     "apiserver moves to another when the one it uses goes; default %(default)s)", type=_endpoints)
    listen: str = flag("127.0.0.1:6443", "gRPC listen address (default %(default)s; port 0 picks one)",
                       type=host_port_arg)
    metrics_listen: str = flag("", "HTTP address for /metrics, /healthz, /readyz (default: off)",
                               type=optional_host_port_arg)
    rest_listen: str = flag("", "HTTP address of the Kubernetes REST API that kubectl uses (default: off; port 0 "
                            "picks one)", type=optional_host_port_arg)
    etcd_prefix: str = flag("/registry", "key prefix in etcd (default %(default)s)")
    compaction_interval: float = flag(300.0, "seconds between etcd compactions, 0 disables (default %(default)s)",
                                      type=float)
    etcd_defrag_free_ratio: float = flag(0.5, "after a compaction, defragment each etcd member whose file is at least "
                                         "this fraction free space, one after another; 0 disables (default "
                                         "%(default)s)", type=float)
    etcd_defrag_min_free_bytes: int = flag(16 << 20, "and at least this many bytes free (default %(default)s)",
                                           type=int)
    bookmark_interval: float = flag(60.0, "seconds between watch bookmarks (default %(default)s)", type=float)
    watch_cache_size: int = flag(10_000, "events kept per resource (default %(default)s)", type=int)
    watcher_buffer: int = flag(1_000, "events a watcher may lag before it is ended (default %(default)s)", type=int)
    namespace_finalize_interval: float = flag(1.0, "seconds between passes of the namespace finalizer", shown=False)
    etcd_request_timeout: float = flag(10.0, "seconds an etcd call may take; then the request fails (a read 503, a "
                                       "write whose outcome is unknown 504, both with Retry-After) (default "
                                       "%(default)s)", type=float)
    etcd_keepalive: float = flag(30.0, "seconds between keepalive pings on a silent etcd connection", shown=False,
                                 type=float)
    etcd_keepalive_timeout: float = flag(10.0, "seconds a keepalive ping may go unanswered before the etcd "
                                         "connection is given up and made again", shown=False, type=float)
    etcd_wait: float = flag(30.0, "seconds to wait for etcd at start (default %(default)s)", type=float)
    event_ttl: float = flag(3600.0, "seconds Events are kept after their last write, 0: forever (default "
                            "%(default)s)", type=float)
    cluster_cidr: str = flag("10.88.0.0/16", "CIDR nodes' pod CIDRs are allocated from; empty: none (default "
                             "%(default)s)", type=cidr_arg)
    node_cidr_mask_size: int = flag(24, "prefix length of each node's pod CIDR (default %(default)s)", type=int)
    # Services' ClusterIPs and node ports come out of these (never overlapping cluster_cidr).
    service_cluster_ip_range: str = flag("10.96.0.0/16", "Services' ClusterIPs come out of it, never overlapping "
                                         "--cluster-cidr (default %(default)s)", type=cidr_arg)
    service_node_port_range: str = flag("30000-32767", "node ports come out of it (default %(default)s)")
    advertise_address: str = flag("", "the address the kubernetes Service's endpoints name (default: the REST "
                                  "listener's host)", type=ip_arg)
    advertise_port: int = flag(0, "their port (default: the REST port; another when a load balancer is in front)",
                               type=int)
    conversion_webhook_timeout: float = flag(30.0, "seconds a CRD's conversion webhook may take", shown=False)
    allocation_repair_interval: float = flag(60.0, "seconds between repairs of the Service allocations",
                                             shown=False)
    # Serving TLS for gRPC and REST (both files, or neither: plain text), client
    # certificates verified against client_ca_file; static tokens; anonymous requests.
    tls_cert_file: str = flag("", "serving certificate (PEM) for gRPC and REST; default: plain text")
    tls_private_key_file: str = flag("", "its private key (PEM)")
    client_ca_file: str = flag("", "authenticate client certificates signed by this CA (user = CN, groups = O); "
                               "gRPC clients must then present one")
    token_auth_file: str = flag("", "static bearer tokens, upstream's CSV: token,user,uid[,\"group1,group2\"]")
    enable_bootstrap_token_auth: bool = flag(False, "accept bootstrap tokens (Secrets of type "
                                             "bootstrap.kubernetes.io/token in kube-system) as bearer tokens: what "
                                             "`kubeling join` presents", action="store_true")
    audit_policy_file: str = flag("", "an audit.k8s.io/v1 Policy: which requests are audited, at which level "
                                  "(with --audit-log-path or --audit-webhook-config-file; default: nothing "
                                  "audited)")
    audit_log_path: str = flag("", "the audit log: one JSON event a line (`-`: standard output)")
    audit_log_maxsize: int = flag(0, "megabytes an audit log reaches before it is rotated (default 0: never)",
                                  type=int)
    audit_log_maxbackup: int = flag(0, "rotated audit logs kept (default 0: every one)", type=int)
    audit_log_maxage: int = flag(0, "days a rotated audit log is kept (default 0: no limit)", type=int)
    audit_webhook_config_file: str = flag("", "a kubeconfig naming the server audit events are POSTed to as "
                                          "EventLists (with --audit-policy-file)")
    audit_webhook_mode: str = flag("batch", "how events reach the webhook: batch (default; blocking modes are "
                                   "not supported)")
    audit_webhook_batch_buffer_size: int = flag(10000, "events held for the webhook before new ones are dropped "
                                                "(default %(default)s)", type=int)
    audit_webhook_batch_max_size: int = flag(400, "events in one webhook request at most (default %(default)s)",
                                             type=int)
    audit_webhook_batch_max_wait: float = flag(30.0, "seconds an event waits for its batch to fill "
                                               "(default %(default)s)", type=float)
    audit_webhook_initial_backoff: float = flag(10.0, "seconds before a failed batch is sent again, growing 1.5x "
                                                "(default %(default)s)", type=float)
    encryption_provider_config: str = flag("", "an apiserver.config.k8s.io/v1 EncryptionConfiguration: the "
                                           "resources encrypted in etcd and their providers and keys (default: "
                                           "none encrypted)")
    enable_priority_and_fairness: bool = flag(True, "API Priority and Fairness: requests classified by the "
                                              "FlowSchemas, given seats of their priority level, queued fairly or "
                                              "refused with 429 (default true)", type=boolean)
    # Fewer than upstream's 400 and 200: one Python process on a few cores serves no more at
    # once, and fewer seats keep big LISTs from crowding its event loop (bench.flowcontrol).
    max_requests_inflight: int = flag(60, "with --max-mutating-requests-inflight, the seats Priority and Fairness "
                                      "shares among the priority levels (default %(default)s)", type=int)
    max_mutating_requests_inflight: int = flag(30, "see --max-requests-inflight (default %(default)s)", type=int)
    anonymous_auth: bool = flag(True, "serve unauthenticated REST requests as system:anonymous (default true)",
                                type=boolean)
    authorization_mode: str = flag("AlwaysAllow", "comma-separated, asked in order: AlwaysAllow, Node (kubelets), "
                                   "RBAC (the stored roles and bindings); e.g. Node,RBAC (default %(default)s)",
                                   type=_modes)
    # upstream's pair: every plugin is on by default (and runs in this order), --enable adds
    # to the defaults (kubeadm's `--enable-admission-plugins=NodeRestriction` changes
    # nothing), --disable takes away
    admission_plugins: str = flag("", "comma-separated admission plugins to enable in addition to the default ones "
                                  "(all of: " + ", ".join(ADMISSION_PLUGINS) + ")",
                                  name="enable-admission-plugins")
    disable_admission_plugins: str = flag("", "comma-separated admission plugins to turn off although they are on "
                                          "by default")
    default_not_ready_toleration_seconds: int = flag(300, "DefaultTolerationSeconds: how long pods tolerate a "
                                                     "not-ready node (default %(default)s)", type=int)
    default_unreachable_toleration_seconds: int = flag(300, "DefaultTolerationSeconds: how long pods tolerate an "
                                                       "unreachable node (default %(default)s)", type=int)
    # ServiceAccount tokens: signed with this ECDSA P-256 key (kubeling.pki's sa.key; empty:
    # a key made at start, so tokens die with the process), for this issuer and audiences.
    service_account_signing_key_file: str = flag("", "the ECDSA P-256 key ServiceAccount tokens are signed with "
                                                 "(the PKI's sa.key); default: one made at start")
    service_account_issuer: str = flag(DEFAULT_ISSUER, "the tokens' iss (default %(default)s)")
    api_audiences: str = flag("", "audiences the API accepts, comma-separated (default: the issuer)")
    # To the kubelets: HTTPS with this client certificate, their serving certificates
    # verified against the CA (all three, or none: plain HTTP).
    kubelet_client_certificate: str = flag("", "the apiserver's client certificate for the kubelets (logs, exec, "
                                           "port-forward)")
    kubelet_client_key: str = flag("", "its private key")
    kubelet_certificate_authority: str = flag("", "verify the kubelets' serving certificates against this CA (all "
                                              "three: HTTPS)")
    # To extension apiservers (aggregation): the front-proxy client certificate, and what
    # they are told (the extension-apiserver-authentication ConfigMap) to trust it by.
    proxy_client_cert_file: str = flag("", "the client certificate the aggregator presents to extension apiservers "
                                       "(the PKI's front-proxy-client.crt)")
    proxy_client_key_file: str = flag("", "its private key")
    requestheader_client_ca_file: str = flag("", "the CA of the front-proxy client certificate (front-proxy-ca.crt),"
                                             " published to extension apiservers")
    requestheader_allowed_names: str = flag("front-proxy-client", "the common names of client certificates "
                                            "allowed to name the user in headers, comma-separated "
                                            "(default %(default)s)")
    enable_aggregator_routing: bool = flag(False, "proxy aggregated requests to an endpoint of the APIService's "
                                           "Service instead of its ClusterIP (default false)", type=boolean)
    # To etcd: TLS with this client certificate, etcd's verified against the CA (all three, or none).
    etcd_cafile: str = flag("", "verify etcd's serving certificate against this CA")
    etcd_certfile: str = flag("", "the apiserver's client certificate for etcd")
    etcd_keyfile: str = flag("", "its private key (all three: TLS to etcd)")
