"""Certificates for the local control plane.

One throw-away CA signs:

* the serving certificate of kube-apiserver (and kwok's kubelet endpoint) for ``127.0.0.1``,
  ``localhost`` and the in-cluster ``kubernetes`` service names;
* the admin client certificate (``CN=nvcre-admin``, ``O=system:masters``) that the kubeconfig
  uses, so every request is authorised by the bootstrap ``cluster-admin`` binding under RBAC;
* the same for the manager the tests run (``CN=nvcre-test-manager``, ``O=system:masters``): as
  powerful, but a user of its own, so the audit log can record its requests and nobody else's.

A separate RSA key pair signs and verifies service-account tokens. Keys are EC P-256 where the
peer accepts it (fast to generate) and RSA-2048 for service accounts.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ADMIN_USER = "nvcre-admin"
ADMIN_GROUP = "system:masters"
MANAGER_USER = "nvcre-test-manager"
SERVING_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
SERVING_IPS = ("127.0.0.1", "10.0.0.1")
VALIDITY = datetime.timedelta(days=7)

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class CertFiles:
    """Paths of the PEM files written by :func:`write_cert_dir`."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_private_key: Path
    sa_public_key: Path
    ca: KeyPair
    admin: KeyPair
    manager: KeyPair


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    """Digital signatures, and certificate and CRL signing for a CA."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, common_name: str = "nvcre-test-ca") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self.cert = (
            _builder(self.name, self.name, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(signs_certificates=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pair(self) -> KeyPair:
        return KeyPair(_cert_pem(self.cert), _key_pem(self.key))

    def _issue(
        self, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(subject, self.name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(signs_certificates=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return KeyPair(_cert_pem(cert), _key_pem(key))

    def serving(
        self, dns_names: tuple[str, ...] = SERVING_DNS_NAMES, ips: tuple[str, ...] = SERVING_IPS
    ) -> KeyPair:
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0] if dns_names else ips[0])])
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate: Kubernetes reads the user from CN and groups from O."""
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._issue(x509.Name(attrs), ExtendedKeyUsageOID.CLIENT_AUTH, [])


def service_account_keys() -> KeyPair:
    """RSA key pair for signing service-account tokens (``cert_pem`` holds the public key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(public, _key_pem(key))


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


def write_cert_dir(directory: Path) -> CertFiles:
    """Generate a CA, serving, admin and service-account material into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority()
    serving = ca.serving()
    admin = ca.client(ADMIN_USER, (ADMIN_GROUP,))
    manager = ca.client(MANAGER_USER, (ADMIN_GROUP,))
    sa = service_account_keys()
    return CertFiles(
        ca_cert=_write(directory / "ca.crt", ca.pair.cert_pem),
        serving_cert=_write(directory / "apiserver.crt", serving.cert_pem),
        serving_key=_write(directory / "apiserver.key", serving.key_pem, private=True),
        admin_cert=_write(directory / "admin.crt", admin.cert_pem),
        admin_key=_write(directory / "admin.key", admin.key_pem, private=True),
        sa_private_key=_write(directory / "sa.key", sa.key_pem, private=True),
        sa_public_key=_write(directory / "sa.pub", sa.cert_pem),
        ca=ca.pair,
        admin=admin,
        manager=manager,
    )
