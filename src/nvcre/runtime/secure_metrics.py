"""Secure metrics as controller-runtime serves them (``--metrics-secure``): HTTPS, and each scrape
authenticated by a TokenReview of its bearer token and authorised by a SubjectAccessReview of
``get`` on the non-resource URL ``/metrics``.

A scrape without a token, or with one the API server does not accept, gets 401; an
authenticated one whose user may not ``get /metrics`` (the ``metrics-reader`` ClusterRole grants
it) gets 403. Verdicts are cached by the token's digest (allowed for a minute, refused for ten
seconds, as controller-runtime's filter caches them), so a Prometheus scraping every few seconds
costs the API server two reviews a minute. Tokens are never logged.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import logging
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from lightkube import ApiError, AsyncClient
from lightkube.models.authentication_v1 import TokenReviewSpec
from lightkube.models.authorization_v1 import NonResourceAttributes, SubjectAccessReviewSpec
from lightkube.resources.authentication_v1 import TokenReview
from lightkube.resources.authorization_v1 import SubjectAccessReview

log = logging.getLogger("nvcre.metrics")

METRICS_PATH = "/metrics"
ALLOWED_TTL = 60.0
DENIED_TTL = 10.0
RELOAD_INTERVAL = 10.0
OK, UNAUTHORIZED, FORBIDDEN, UNAVAILABLE = 200, 401, 403, 503


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None for any other)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


@dataclass(frozen=True)
class Verdict:
    status: int
    until: float


def cache_for(status: int, now: float) -> Verdict | None:
    """How long a scrape's verdict is kept: allowed and refused ones briefly, an outage not at all."""
    if status == OK:
        return Verdict(status, now + ALLOWED_TTL)
    if status in (UNAUTHORIZED, FORBIDDEN):
        return Verdict(status, now + DENIED_TTL)
    return None


class Reviewer:
    """Authenticates and authorises scrapes through the API server (TokenReview, SubjectAccessReview)."""

    def __init__(self, client: AsyncClient, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.clock = clock
        self._verdicts: dict[str, Verdict] = {}

    async def __call__(self, authorization: str | None) -> int:
        """The HTTP status of a scrape with this ``Authorization`` header (200: serve it)."""
        token = bearer_token(authorization)
        if token is None:
            return UNAUTHORIZED
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        cached = self._verdicts.get(key)
        if cached is not None and cached.until > now:
            return cached.status
        self._verdicts = {k: v for k, v in self._verdicts.items() if v.until > now}
        try:
            status = await self._review(token)
        except (ApiError, httpx2.HTTPError, OSError) as error:
            log.warning("metrics scrape not reviewed: %s", error)
            status = UNAVAILABLE
        verdict = cache_for(status, now)
        if verdict is not None:
            self._verdicts[key] = verdict
        return status

    async def _review(self, token: str) -> int:
        review = await self.client.create(TokenReview(spec=TokenReviewSpec(token=token)))
        user = review.status
        if user is None or not user.authenticated or user.user is None:
            return UNAUTHORIZED
        access = await self.client.create(
            SubjectAccessReview(
                spec=SubjectAccessReviewSpec(
                    user=user.user.username,
                    uid=user.user.uid,
                    groups=user.user.groups,
                    extra=user.user.extra,
                    nonResourceAttributes=NonResourceAttributes(path=METRICS_PATH, verb="get"),
                )
            )
        )
        return OK if access.status is not None and access.status.allowed else FORBIDDEN


def self_signed(hosts: tuple[str, ...] = ("localhost",)) -> tuple[bytes, bytes]:
    """A throw-away serving certificate and its key (PEM), valid a year, for when no
    ``--metrics-cert-path`` is given (what controller-runtime does too)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nvcre-manager-metrics")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


class ServingCert:
    """The metrics server's TLS: the certificate and key in ``cert_dir``, re-read when either file
    changes (as controller-runtime's certwatcher does, for a Secret cert-manager renews), or a
    self-signed pair held in memory (the manager's root filesystem is read-only)."""

    def __init__(self, cert_dir: str = "", cert_name: str = "tls.crt", key_name: str = "tls.key") -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.files = (Path(cert_dir) / cert_name, Path(cert_dir) / key_name) if cert_dir else None
        self._seen = self._stamp()
        if self.files is None:
            cert, key = self_signed()
            fd = os.memfd_create("nvcre-metrics-tls")
            try:
                os.write(fd, cert + key)
                self.context.load_cert_chain(f"/proc/self/fd/{fd}")
            finally:
                os.close(fd)
        else:
            self.context.load_cert_chain(*self.files)

    def _stamp(self) -> tuple[tuple[int, int], ...]:
        """Each file's (inode, modification time): a Secret's update swaps the files' symlink."""
        if self.files is None:
            return ()
        stats = [f.stat() for f in self.files]
        return tuple((st.st_ino, st.st_mtime_ns) for st in stats)

    def reload(self) -> bool:
        """Load the files again if they changed; new connections get them. True when reloaded."""
        try:
            stamp = self._stamp()
            if stamp == self._seen:
                return False
            assert self.files is not None
            self.context.load_cert_chain(*self.files)
        except (OSError, ssl.SSLError) as error:
            log.warning("metrics certificate not reloaded, the one loaded before is served: %s", error)
            return False
        self._seen = stamp
        log.info("metrics certificate reloaded from %s", self.files[0])
        return True

    async def watch(self, interval: float = RELOAD_INTERVAL) -> None:
        """Reload the files when they change, every ``interval`` seconds, until cancelled (a task
        of the manager's run: only with files, since a task that ends stops the manager)."""
        while True:
            await asyncio.sleep(interval)
            self.reload()
