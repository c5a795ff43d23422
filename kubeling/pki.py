"""The cluster's PKI, as kubeadm's certs phase lays it out (`<state-dir>/pki`): one cluster
CA and every certificate the components present, named as upstream names their
identities, plus the ServiceAccount token signing key.

  ca.crt, ca.key                          the cluster CA
  apiserver.crt                           serving: 127.0.0.1, localhost, the given names
  apiserver-etcd-client.crt               apiserver -> etcd (CN kube-apiserver-etcd-client)
  apiserver-kubelet-client.crt            apiserver -> kubelets (CN kube-apiserver-kubelet-client)
  etcd/server.crt                         etcd serving
  admin.crt                               CN kubernetes-admin, O system:masters (the kubeconfig's)
  scheduler.crt                           CN system:kube-scheduler
  controller-manager.crt                  CN system:kube-controller-manager
  kubelet/<node>.crt                      the kubelet's serving certificate (its node name and IPs)
  kubelet/<node>-client.crt               CN system:node:<node>, O system:nodes
  sa.key, sa.pub                          ServiceAccount tokens' signing key

Each .crt has its .key beside it; keys are 0600. Keys are ECDSA P-256 (kubeadm's
`ECDSA-P256`: cheaper handshakes and key generation than RSA 2048). `ensure` is
idempotent and upgrades a state dir: what is missing, expired within a day, not issued by
this CA, or lacking a wanted name is (re)issued; everything else is kept.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["PKI", "Identity", "Expiration", "ensure", "expirations", "renew", "node_identities", "self_signed",
           "FRONT_PROXY_CA", "FRONT_PROXY_CLIENT"]

CA_DAYS = 3650
LEAF_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=1)
SERVER, CLIENT = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH


@dataclass(frozen=True)
class Identity:
    """One certificate to hold: its file (without suffix), subject and what it is for."""

    path: str
    common_name: str
    organizations: tuple[str, ...] = ()
    usages: tuple[x509.ObjectIdentifier, ...] = (CLIENT,)
    names: tuple[str, ...] = ()  # subjectAltNames: DNS names and IP addresses


@dataclass
class PKI:
    root: Path
    issued: list[str] = field(default_factory=list)  # what the last ensure() (re)issued

    def cert(self, path: str) -> Path:
        return self.root / f"{path}.crt"

    def key(self, path: str) -> Path:
        return self.root / f"{path}.key"

    @property
    def ca(self) -> Path:
        return self.cert("ca")


KUBERNETES_SERVICE_IP = "10.96.0.1"


def control_plane_identities(server_names: Iterable[str] = ()) -> list[Identity]:
    # the kubernetes Service's ClusterIP (the default service range's first address) and
    # names: in-cluster clients verify the apiserver by them, as kubeadm's certificate allows
    names = ("127.0.0.1", "localhost", KUBERNETES_SERVICE_IP, "kubernetes", "kubernetes.default",
             "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", *server_names)
    return [
        Identity("apiserver", "kube-apiserver", usages=(SERVER,), names=tuple(dict.fromkeys(names))),
        Identity("apiserver-etcd-client", "kube-apiserver-etcd-client"),
        Identity("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("kubeadm:cluster-admins",)),
        Identity("etcd/server", "etcd", usages=(SERVER, CLIENT),
                 names=tuple(dict.fromkeys(("127.0.0.1", "localhost", "etcd", *server_names)))),
        Identity("admin", "kubernetes-admin", ("system:masters",)),
        Identity("scheduler", "system:kube-scheduler"),
        Identity("controller-manager", "system:kube-controller-manager"),
        Identity("kube-proxy", "system:kube-proxy"),
        Identity("kube-dns", "system:kube-dns"),
        Identity("network-policy", "system:network-policy"),  # the network policy controllers
        Identity("ingress-controller", "system:ingress-controller"),
        Identity("csi-hostpath", "system:csi-hostpath"),  # the hostpath CSI driver's sidecars
        # the metrics server: its client certificate (apiserver and kubelets) and its serving
        # one, named as the aggregator verifies it (<service>.<namespace>.svc)
        Identity("metrics-server", "system:metrics-server"),
        Identity("metrics-server-serving", "metrics-server", usages=(SERVER,), names=tuple(dict.fromkeys((
            "metrics-server.kube-system.svc", "127.0.0.1", "localhost", *server_names)))),
    ]


def node_identities(node: str, addresses: Iterable[str] = ()) -> list[Identity]:
    return [
        Identity(f"kubelet/{node}", node, usages=(SERVER,),
                 names=tuple(dict.fromkeys((node, "127.0.0.1", "localhost", *addresses)))),
        Identity(f"kubelet/{node}-client", f"system:node:{node}", ("system:nodes",)),
    ]


# The aggregator's own CA and the client certificate it presents to extension apiservers
# (upstream's front-proxy-ca and front-proxy-client, kubeadm's names): an extension
# server trusts the headers naming the user only from a certificate of this CA.
FRONT_PROXY_CA = "front-proxy-ca"
FRONT_PROXY_CLIENT = Identity("front-proxy-client", "front-proxy-client")


def ensure(root: Path, nodes: dict[str, list[str]], server_names: Iterable[str] = ()) -> PKI:
    """The PKI under root for these nodes (name -> its addresses): made or brought up to
    date. A CA that is missing or expiring is made anew, and every certificate with it."""
    pki = PKI(root)
    (root / "etcd").mkdir(parents=True, exist_ok=True)
    (root / "kubelet").mkdir(exist_ok=True)
    ca_cert, ca_key = _ensure_ca(pki)
    wanted = control_plane_identities(server_names)
    for node, addresses in nodes.items():
        wanted += node_identities(node, addresses)
    for identity in wanted:
        if not _current(pki, identity, ca_cert):
            _issue(pki, identity, ca_cert, ca_key)
            pki.issued.append(identity.path)
    proxy_cert, proxy_key = _ensure_ca(pki, FRONT_PROXY_CA, "front-proxy-ca")
    if not _current(pki, FRONT_PROXY_CLIENT, proxy_cert):
        _issue(pki, FRONT_PROXY_CLIENT, proxy_cert, proxy_key)
        pki.issued.append(FRONT_PROXY_CLIENT.path)
    _ensure_service_account_key(pki)
    return pki


@dataclass(frozen=True)
class Expiration:
    """One certificate of the PKI as kubeadm's `certs check-expiration` lists it."""

    path: str  # under the PKI root, without .crt ("apiserver", "kubelet/node-1-client")
    not_after: datetime.datetime
    authority: str  # the CA that signed it ("" for a CA)


CAS = ("ca", FRONT_PROXY_CA)


def expirations(root: Path) -> list[Expiration]:
    """Every certificate under root, CAs first, each with its end and its CA."""
    pki = PKI(root)
    cas = {path: cert for path in CAS if (cert := _load_cert(pki.cert(path))) is not None}
    out = [Expiration(path, cert.not_valid_after_utc, "") for path, cert in cas.items()]
    for file in sorted(root.rglob("*.crt")):
        path = str(file.relative_to(root).with_suffix(""))
        cert = _load_cert(file)
        if path in cas or cert is None:
            continue
        out.append(Expiration(path, cert.not_valid_after_utc, _authority(cert, cas)))
    return out


def renew(root: Path, paths: Iterable[str] = ()) -> list[str]:
    """Issue the named certificates (default: every one a CA of root signed) again, for
    another LEAF_DAYS, with a new key and the same subject, usages and names — kubeadm's
    `certs renew`. CAs are not renewed. The renewed paths."""
    pki = PKI(root)
    cas = {path: loaded for path in CAS if (loaded := _load(pki, path)) is not None}
    wanted = set(paths)
    known = {e.path: e for e in expirations(root) if e.authority}
    unknown = wanted - set(known)
    if unknown:
        raise ValueError(f"no certificate {', '.join(sorted(unknown))} under {root} (known: "
                         f"{', '.join(sorted(known))})")
    renewed = []
    for path, found in known.items():
        if wanted and path not in wanted:
            continue
        cert = _load_cert(pki.cert(path))
        assert cert is not None
        ca_cert, ca_key = cas[found.authority]
        _issue(pki, _identity_of(path, cert), ca_cert, ca_key)
        renewed.append(path)
    return renewed


def _load_cert(file: Path) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(file.read_bytes())
    except (OSError, ValueError):
        return None


def _authority(cert: x509.Certificate, cas: dict[str, x509.Certificate]) -> str:
    for path, ca in cas.items():
        try:
            cert.verify_directly_issued_by(ca)
            return path
        except (ValueError, TypeError, InvalidSignature):
            continue
    return "?"


def _identity_of(path: str, cert: x509.Certificate) -> Identity:
    """What a certificate of ours says of itself, to issue it again."""
    common_name = next((str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)), "")
    organizations = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    try:
        usages = tuple(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        usages = (CLIENT,)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = tuple([*san.get_values_for_type(x509.DNSName),
                       *(str(ip) for ip in san.get_values_for_type(x509.IPAddress))])
    except x509.ExtensionNotFound:
        names = ()
    return Identity(path, common_name, organizations, usages, names)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _load(pki: PKI, path: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    try:
        cert = x509.load_pem_x509_certificate(pki.cert(path).read_bytes())
        key = serialization.load_pem_private_key(pki.key(path).read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or cert.public_key() != key.public_key():
        return None
    return cert, key


def _ensure_ca(pki: PKI, path: str = "ca", common_name: str = "kubernetes"
               ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    loaded = _load(pki, path)
    if loaded is not None and loaded[0].not_valid_after_utc - RENEW_BEFORE > _now():
        return loaded
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    _write_key(pki.key(path), key)
    _write_cert(pki.cert(path), cert)
    pki.issued.append(path)
    return cert, key


def self_signed(common_name: str, names: Iterable[str] = (), days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed serving certificate and its key, PEM (an ingress controller's default
    certificate, test servers' own)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    alt = _alt_names(names)
    if alt:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    cert = builder.sign(key, hashes.SHA256())
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def _alt_names(names: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for name in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def _current(pki: PKI, identity: Identity, ca: x509.Certificate) -> bool:
    """Whether the identity's certificate exists, is this CA's, lives on and names what it must."""
    loaded = _load(pki, identity.path)
    if loaded is None:
        return False
    cert = loaded[0]
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    if cert.not_valid_after_utc - RENEW_BEFORE <= _now():
        return False
    if identity.names:
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return False
        if not set(_alt_names(identity.names)) <= set(san):
            return False
    return cert.subject == _subject(identity)


def _subject(identity: Identity) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in identity.organizations]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, identity.common_name)])


def _issue(pki: PKI, identity: Identity, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    builder = (x509.CertificateBuilder().subject_name(_subject(identity)).issuer_name(ca.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(min(now + datetime.timedelta(days=LEAF_DAYS), ca.not_valid_after_utc))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(list(identity.usages)), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    if identity.names:
        builder = builder.add_extension(x509.SubjectAlternativeName(_alt_names(identity.names)), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(pki.key(identity.path), key)
    _write_cert(pki.cert(identity.path), cert)


def _ensure_service_account_key(pki: PKI) -> None:
    private, public = pki.root / "sa.key", pki.root / "sa.pub"
    if private.exists() and public.exists():
        return
    key = ec.generate_private_key(ec.SECP256R1())
    _write_key(private, key)
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    pki.issued.append("sa")
