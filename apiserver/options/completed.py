"""The apiserver's settings checked and turned into what the server is built from
(upstream's CompletedOptions): TLS files read, tokens and keys loaded, ranges parsed.
Everything that can be wrong with the configuration fails here, as a ConfigError naming
the flag, before anything is started."""

from __future__ import annotations

import ipaddress
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography.hazmat.primitives.asymmetric import ec

from apiserver.audit import AuditLog, Auditor, AuditSink, load_policy
from apiserver.audit.webhook import AuditWebhook, load_target
from apiserver.auth.authentication import Authenticator, load_token_file
from apiserver.auth.authorization import parse_modes
from apiserver.auth.tokens import TokenIssuer, load_signing_key
from apiserver.controllers.nodeipam import CIDRAllocator
from apiserver.options.config import ADMISSION_PLUGINS, Config
from apiserver.registry.core.allocator import IPRange, PortRange
from apiserver.storage.encryption import EncryptionConfig, load_encryption_config
from apiserver.storage.etcd import EtcdTLS
from kubeling.options import ConfigError
from kubeling.servingtls import ServingTLS, client_context

__all__ = ["Completed", "complete"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completed:
    config: Config
    serving_tls: ServingTLS | None
    authenticator: Authenticator
    # gRPC calls are told apart only by certificates or tokens: without either, nobody is authenticated there.
    grpc_authenticates: bool
    token_issuer: TokenIssuer
    authorization_modes: list[str]
    admission_plugins: list[str]
    kubelet_ssl: ssl.SSLContext | None
    etcd_tls: EtcdTLS | None
    service_ips: IPRange
    node_ports: PortRange
    pod_cidrs: CIDRAllocator | None  # None: nodes get no pod CIDR
    auditor: Auditor | None  # None: nothing audited
    encryption: EncryptionConfig | None  # None: nothing encrypted at rest


def complete(cfg: Config) -> Completed:
    modes = _modes(cfg)
    ips, ports = _service_ranges(cfg)
    return Completed(
        config=cfg, serving_tls=_serving_tls(cfg), authenticator=_authenticator(cfg),
        grpc_authenticates=bool(cfg.client_ca_file or cfg.token_auth_file or not cfg.anonymous_auth
                                or modes != ["AlwaysAllow"]),
        token_issuer=_token_issuer(cfg), authorization_modes=modes, admission_plugins=_admission_plugins(cfg),
        kubelet_ssl=_kubelet_ssl(cfg), etcd_tls=_etcd_tls(cfg), service_ips=ips, node_ports=ports,
        pod_cidrs=_pod_cidrs(cfg), auditor=_auditor(cfg), encryption=_encryption(cfg))


def _encryption(cfg: Config) -> EncryptionConfig | None:
    if not cfg.encryption_provider_config:
        return None
    try:
        return load_encryption_config(Path(cfg.encryption_provider_config))
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise ConfigError(f"--encryption-provider-config: {err}") from None


def _auditor(cfg: Config) -> Auditor | None:
    """Audit events when a policy and a backend (a log, a webhook) are given (upstream:
    without a policy, nothing is audited)."""
    backends = cfg.audit_log_path or cfg.audit_webhook_config_file
    if not cfg.audit_policy_file or not backends:
        if cfg.audit_policy_file or backends:
            log.warning("--audit-policy-file goes with --audit-log-path or --audit-webhook-config-file: "
                        "nothing is audited")
        return None
    for flag_name, value in (("--audit-log-maxsize", cfg.audit_log_maxsize),
                             ("--audit-log-maxbackup", cfg.audit_log_maxbackup),
                             ("--audit-log-maxage", cfg.audit_log_maxage),
                             ("--audit-webhook-batch-buffer-size", cfg.audit_webhook_batch_buffer_size - 1),
                             ("--audit-webhook-batch-max-size", cfg.audit_webhook_batch_max_size - 1),
                             ("--audit-webhook-batch-max-wait", cfg.audit_webhook_batch_max_wait),
                             ("--audit-webhook-initial-backoff", cfg.audit_webhook_initial_backoff)):
        if value < 0:
            raise ConfigError(f"{flag_name}: out of range")
    try:
        policy = load_policy(Path(cfg.audit_policy_file))
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise ConfigError(f"--audit-policy-file: {err}") from None
    sinks: list[AuditSink] = []
    if cfg.audit_log_path:
        sinks.append(AuditLog(cfg.audit_log_path, cfg.audit_log_maxsize, cfg.audit_log_maxbackup,
                              cfg.audit_log_maxage))
    if cfg.audit_webhook_config_file:
        if cfg.audit_webhook_mode != "batch":
            raise ConfigError(f'--audit-webhook-mode: Unsupported value: "{cfg.audit_webhook_mode}": '
                              'supported values: "batch"')
        try:
            target = load_target(Path(cfg.audit_webhook_config_file))
        except (OSError, ValueError, ssl.SSLError) as err:
            raise ConfigError(f"--audit-webhook-config-file: {err}") from None
        sinks.append(AuditWebhook(target, buffer_size=cfg.audit_webhook_batch_buffer_size,
                                  max_batch=cfg.audit_webhook_batch_max_size,
                                  max_wait=cfg.audit_webhook_batch_max_wait,
                                  initial_backoff=cfg.audit_webhook_initial_backoff))
    return Auditor(policy, sinks)


def _modes(cfg: Config) -> list[str]:
    try:
        return parse_modes(cfg.authorization_mode)
    except ValueError as err:
        raise ConfigError(f"--authorization-mode: {err}") from None


def _serving_tls(cfg: Config) -> ServingTLS | None:
    if bool(cfg.tls_cert_file) != bool(cfg.tls_private_key_file):
        raise ConfigError("--tls-cert-file and --tls-private-key-file go together")
    if cfg.client_ca_file and not cfg.tls_cert_file:
        raise ConfigError("--client-ca-file needs --tls-cert-file: client certificates come with TLS")
    if not cfg.tls_cert_file:
        return None
    tls = ServingTLS(Path(cfg.tls_cert_file), Path(cfg.tls_private_key_file),
                     Path(cfg.client_ca_file) if cfg.client_ca_file else None)
    try:
        tls.check()
    except (OSError, ValueError) as err:
        raise ConfigError(str(err)) from None
    return tls


def _authenticator(cfg: Config) -> Authenticator:
    try:
        tokens = load_token_file(Path(cfg.token_auth_file)) if cfg.token_auth_file else {}
    except (OSError, ValueError) as err:
        raise ConfigError(f"--token-auth-file: {err}") from None
    return Authenticator(tokens, cfg.anonymous_auth)


def _kubelet_ssl(cfg: Config) -> ssl.SSLContext | None:
    files = (cfg.kubelet_client_certificate, cfg.kubelet_client_key, cfg.kubelet_certificate_authority)
    if not any(files):
        return None
    if not all(files):
        raise ConfigError("--kubelet-client-certificate, --kubelet-client-key and "
                          "--kubelet-certificate-authority go together")
    try:
        return client_context(Path(cfg.kubelet_certificate_authority), Path(cfg.kubelet_client_certificate),
                              Path(cfg.kubelet_client_key))
    except (OSError, ssl.SSLError) as err:
        raise ConfigError(f"the kubelet client certificate: {err}") from None


def _token_issuer(cfg: Config) -> TokenIssuer:
    if cfg.service_account_signing_key_file:
        try:
            key = load_signing_key(Path(cfg.service_account_signing_key_file).read_bytes())
        except (OSError, ValueError) as err:
            raise ConfigError(f"--service-account-signing-key-file: {err}") from None
    else:
        log.warning("no --service-account-signing-key-file: ServiceAccount tokens are signed with a key made "
                    "now, and die with this process")
        key = ec.generate_private_key(ec.SECP256R1())
    audiences = tuple(a.strip() for a in cfg.api_audiences.split(",") if a.strip()) or (cfg.service_account_issuer,)
    return TokenIssuer(key, cfg.service_account_issuer, audiences)


def _etcd_tls(cfg: Config) -> EtcdTLS | None:
    files = (cfg.etcd_cafile, cfg.etcd_certfile, cfg.etcd_keyfile)
    if not any(files):
        return None
    if not all(files):
        raise ConfigError("--etcd-cafile, --etcd-certfile and --etcd-keyfile go together")
    try:
        ca, cert, key = (Path(f).read_bytes() for f in files)
    except OSError as err:
        raise ConfigError(f"etcd TLS: {err}") from None
    return EtcdTLS(ca, cert, key)


def _service_ranges(cfg: Config) -> tuple[IPRange, PortRange]:
    try:
        ips = IPRange.parse(cfg.service_cluster_ip_range)
    except ValueError as err:
        raise ConfigError(f"--service-cluster-ip-range: {err}") from None
    if ips.size < 8:
        raise ConfigError(f"--service-cluster-ip-range {ips.text} is too small")
    if cfg.cluster_cidr and ips.cidr.overlaps(ipaddress.ip_network(cfg.cluster_cidr)):
        raise ConfigError(f"--service-cluster-ip-range {ips.text} overlaps --cluster-cidr {cfg.cluster_cidr}")
    try:
        ports = PortRange.parse(cfg.service_node_port_range)
    except ValueError as err:
        raise ConfigError(f"--service-node-port-range: {err}") from None
    return ips, ports


def _admission_plugins(cfg: Config) -> list[str]:
    """The plugins that run, in their fixed order: every one but the disabled (upstream's
    --enable-admission-plugins adds to the defaults, and all are default here)."""
    lists = {}
    for flag_name, text in (("--enable-admission-plugins", cfg.admission_plugins),
                            ("--disable-admission-plugins", cfg.disable_admission_plugins)):
        names = [n.strip() for n in text.split(",") if n.strip()]
        for name in names:
            if name not in ADMISSION_PLUGINS:
                raise ConfigError(f"{flag_name}: {name!r} is not one of {', '.join(ADMISSION_PLUGINS)}")
        lists[flag_name] = set(names)
    both = sorted(lists["--enable-admission-plugins"] & lists["--disable-admission-plugins"])
    if both:
        raise ConfigError(f"--enable-admission-plugins and --disable-admission-plugins both name {', '.join(both)}")
    return [p for p in ADMISSION_PLUGINS if p not in lists["--disable-admission-plugins"]]


def _pod_cidrs(cfg: Config) -> CIDRAllocator | None:
    if not cfg.cluster_cidr:
        return None
    try:
        return CIDRAllocator(cfg.cluster_cidr, cfg.node_cidr_mask_size)
    except ValueError as err:
        raise ConfigError(f"--cluster-cidr {cfg.cluster_cidr} with --node-cidr-mask-size "
                          f"{cfg.node_cidr_mask_size}: {err}") from None
