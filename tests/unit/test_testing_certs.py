"""Certificates for the test control plane: chain, usages, SANs and the admin identity."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from nvcre.testing.certs import ADMIN_GROUP, ADMIN_USER, MANAGER_USER, CertificateAuthority, write_cert_dir


def _load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_serving_certificate_is_signed_by_the_ca_for_loopback() -> None:
    ca = CertificateAuthority()
    serving = _load(ca.serving().cert_pem)
    serving.verify_directly_issued_by(ca.cert)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    usage = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_admin_client_certificate_is_in_system_masters() -> None:
    ca = CertificateAuthority()
    admin = _load(ca.client(ADMIN_USER, (ADMIN_GROUP,)).cert_pem)
    admin.verify_directly_issued_by(ca.cert)
    assert admin.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == ADMIN_USER
    assert [a.value for a in admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters"
    ]
    usage = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_ca_is_a_ca() -> None:
    ca = CertificateAuthority()
    assert ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True


def test_write_cert_dir_writes_matching_keys_with_private_modes(tmp_path: Path) -> None:
    files = write_cert_dir(tmp_path / "pki")
    for private in (files.serving_key, files.admin_key, files.sa_private_key):
        assert private.stat().st_mode & 0o077 == 0, private
    serving_key = serialization.load_pem_private_key(files.serving_key.read_bytes(), None)
    assert isinstance(serving_key, ec.EllipticCurvePrivateKey)
    serving_cert = _load(files.serving_cert.read_bytes())
    assert serving_cert.public_key() == serving_key.public_key()
    sa_key = serialization.load_pem_private_key(files.sa_private_key.read_bytes(), None)
    assert isinstance(sa_key, rsa.RSAPrivateKey)
    assert serialization.load_pem_public_key(files.sa_public_key.read_bytes()) == sa_key.public_key()
    _load(files.admin_cert.read_bytes()).verify_directly_issued_by(_load(files.ca_cert.read_bytes()))


def test_the_manager_has_its_own_user_in_system_masters(tmp_path: Path) -> None:
    """As powerful as the admin, but a user the audit log can tell apart."""
    files = write_cert_dir(tmp_path)
    manager = _load(files.manager.cert_pem)
    manager.verify_directly_issued_by(_load(files.ca.cert_pem))
    assert manager.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == MANAGER_USER != ADMIN_USER
    assert [a.value for a in manager.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        ADMIN_GROUP
    ]
