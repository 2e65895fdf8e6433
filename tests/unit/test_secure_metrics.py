"""The pure parts of --metrics-secure: which header carries a token, how long a verdict is kept,
the in-memory self-signed certificate, and the manager's flag errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography import x509

from nvcre.manager.main import main
from nvcre.runtime.secure_metrics import (
    ALLOWED_TTL,
    DENIED_TTL,
    ServingCert,
    Verdict,
    bearer_token,
    cache_for,
    self_signed,
)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.def", "abc.def"),
        ("bearer  abc ", "abc"),
        ("Basic dXNlcjpwYXNz", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_verdicts_are_kept_briefly_and_outages_not_at_all() -> None:
    assert cache_for(200, 100.0) == Verdict(200, 100.0 + ALLOWED_TTL)
    assert cache_for(401, 100.0) == Verdict(401, 100.0 + DENIED_TTL)
    assert cache_for(403, 100.0) == Verdict(403, 100.0 + DENIED_TTL)
    assert cache_for(503, 100.0) is None


def test_the_self_signed_certificate_loads() -> None:
    cert, _ = self_signed()
    parsed = x509.load_pem_x509_certificate(cert)
    assert parsed.subject.rfc4514_string() == "CN=nvcre-manager-metrics"
    assert ServingCert().files is None


def _kubeconfig(tmp_path: Path) -> Path:
    config = tmp_path / "kubeconfig"
    config.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return config


def test_a_missing_certificate_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(
            [
                f"--kubeconfig={_kubeconfig(tmp_path)}",
                "--metrics-secure",
                f"--metrics-cert-path={tmp_path / 'certs'}",
                "--metrics-bind-address=0",
                "--health-probe-bind-address=0",
            ]
        )
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 1
    assert err.startswith(f"nvcre-manager: error: --metrics-cert-path {tmp_path / 'certs'}: ")
    assert "No such file" in err and len(err.splitlines()) == 1


def test_secure_metrics_need_their_own_port(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--metrics-secure", "--metrics-bind-address=:9000", "--health-probe-bind-address=:9000"])
    assert exited.value.code == 2
    assert "--metrics-secure needs --metrics-bind-address apart from --health-probe-bind-address" in (
        capsys.readouterr().err
    )
