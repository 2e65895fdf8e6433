"""The cluster connection every cluster-facing ``nvcrectl`` command shares, kubectl style.

``--kubeconfig`` (else ``$KUBECONFIG``, else ``~/.kube/config``, else in-cluster), ``--context``,
the kubectl overrides of what the context says (``--cluster``, ``--user``, ``-s/--server``,
``--certificate-authority``, ``--client-certificate``, ``--client-key``, ``--token``,
``--as``/``--as-group``/``--as-uid``, ``--insecure-skip-tls-verify``, ``--request-timeout``) and
``-n/--namespace`` (default: the context's namespace, else ``default``). A config that cannot be
used is a user error naming the problem; the token is never printed.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

import click

from nvcre.cli.common import UserError

if TYPE_CHECKING:
    from lightkube import Client
    from lightkube.config.kubeconfig import SingleConfig

P = ParamSpec("P")
R = TypeVar("R")

META_KEY: Final = "nvcre.connection"
DEFAULT_NAMESPACE: Final = "default"
REQUEST_TIMEOUT_SECONDS: Final = 10.0
"""lightkube's default per-request timeout, kept when ``--request-timeout`` is not given."""
_TIMEOUT_UNITS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclass(frozen=True)
class Overrides:
    """The kubectl connection flags that override the kubeconfig context (all unset: none)."""

    cluster: str | None = None
    user: str | None = None
    server: str | None = None
    certificate_authority: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    token: str | None = field(default=None, repr=False)
    impersonate: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    impersonate_uid: str | None = None
    insecure_skip_tls_verify: bool = False
    request_timeout: str | None = None

    def timeout_seconds(self) -> float | None:
        """``--request-timeout`` in seconds (kubectl's form: ``0`` none, ``30``, ``1m``, ``1h30m``)."""
        text = self.request_timeout
        if text is None:
            return REQUEST_TIMEOUT_SECONDS
        if re.fullmatch(r"\d+", text):
            seconds = float(text)
        elif re.fullmatch(r"(\d+(\.\d+)?(h|ms|m|s))+", text):
            seconds = sum(
                float(n) * _TIMEOUT_UNITS[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(h|ms|m|s)", text)
            )
        else:
            raise UserError(
                f'invalid --request-timeout "{text}": give whole seconds or a duration with a unit '
                "(30, 30s, 1m, 1h30m; 0: no timeout)"
            )
        return seconds or None

    def headers(self) -> list[tuple[str, str]]:
        """The impersonation headers of ``--as``, ``--as-group`` and ``--as-uid``."""
        if (self.impersonate_groups or self.impersonate_uid) and not self.impersonate:
            raise UserError("--as-group and --as-uid need --as (the user to impersonate)")
        if not self.impersonate:
            return []
        headers = [("Impersonate-User", self.impersonate)]
        headers += [("Impersonate-Group", group) for group in self.impersonate_groups]
        if self.impersonate_uid:
            headers.append(("Impersonate-Uid", self.impersonate_uid))
        return headers


def overrides() -> Overrides:
    """The connection flags of the running command (none outside one)."""
    ctx = click.get_current_context(silent=True)
    value = ctx.meta.get(META_KEY) if ctx is not None else None
    return value if isinstance(value, Overrides) else Overrides()


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value not in (None, (), False):
            ctx.meta[META_KEY] = replace(ctx.meta.get(META_KEY, Overrides()), **{name: value})
        return value

    return callback


def _override(*decls: str, name: str, help: str, **kwargs: Any) -> Callable[[Callable[P, R]], Callable[P, R]]:
    return click.option(*decls, expose_value=False, callback=_remember(name), help=help, **kwargs)


OVERRIDE_OPTIONS: Final = (
    _override("--cluster", name="cluster", help="Kubeconfig cluster to use (instead of the context's)."),
    _override("--user", name="user", help="Kubeconfig user to use (instead of the context's)."),
    _override("-s", "--server", name="server", help="Address of the Kubernetes API server."),
    _override(
        "--certificate-authority", name="certificate_authority", help="CA certificate file of the API server."
    ),
    _override("--client-certificate", name="client_certificate", help="Client certificate file for TLS."),
    _override("--client-key", name="client_key", help="Client key file for TLS."),
    _override("--token", name="token", help="Bearer token for the API server (never printed)."),
    _override("--as", name="impersonate", help="User to impersonate."),
    _override(
        "--as-group", name="impersonate_groups", multiple=True, help="Group to impersonate (repeatable)."
    ),
    _override("--as-uid", name="impersonate_uid", help="UID to impersonate."),
    _override(
        "--insecure-skip-tls-verify",
        name="insecure_skip_tls_verify",
        is_flag=True,
        help="Do not check the server's certificate (insecure).",
    ),
    _override(
        "--request-timeout",
        name="request_timeout",
        help="How long to wait for one server request (30, 30s, 1m; 0: no timeout). Default 10s.",
    ),
)


def kubeconfig_options(func: Callable[P, R]) -> Callable[P, R]:
    """``--kubeconfig`` and ``--context``, passed as ``kubeconfig`` and ``context`` (alone: for
    commands that take no other connection flag)."""
    func = click.option("--context", default=None, help="Kubeconfig context to use.")(func)
    return click.option(
        "--kubeconfig",
        default=None,
        help="Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config).",
    )(func)


def connection_options(func: Callable[P, R]) -> Callable[P, R]:
    """:func:`kubeconfig_options` and kubectl's overrides of the context, which :func:`client`
    reads from the running command's context (no parameters of their own)."""
    for option in reversed(OVERRIDE_OPTIONS):
        func = option(func)
    return kubeconfig_options(func)


def namespace_option(default: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``-n/--namespace``, passed as ``namespace`` (None when not given)."""
    return click.option(
        "-n",
        "--namespace",
        default=default,
        help="Namespace (default: the kubeconfig context's, else default).",
    )


def _path(text: str | None) -> str | None:
    """A file flag, relative to the working directory (not to the kubeconfig, as its own paths)."""
    return str(Path(text).expanduser().resolve()) if text else None


def single_config(kubeconfig: str | None, context: str | None, flags: Overrides) -> SingleConfig:
    """The context the command connects with: the kubeconfig's, changed by the override flags."""
    import msgspec
    from lightkube import KubeConfig
    from lightkube.config import models
    from lightkube.config.kubeconfig import SingleConfig

    if flags.insecure_skip_tls_verify and flags.certificate_authority:
        raise UserError("--certificate-authority and --insecure-skip-tls-verify are mutually exclusive")
    try:
        path = kubeconfig or os.environ.get("KUBECONFIG")
        loaded = KubeConfig.from_file(path) if path else KubeConfig.from_env()
        config = loaded.get(context_name=context)
        assert config is not None
        if flags.cluster is not None:
            if flags.cluster not in loaded.clusters:
                raise UserError(f'--cluster "{flags.cluster}": no such cluster in the kubeconfig')
            config = config._replace(cluster=loaded.clusters[flags.cluster])
        if flags.user is not None:
            if flags.user not in loaded.users:
                raise UserError(f'--user "{flags.user}": no such user in the kubeconfig')
            config = config._replace(user=loaded.users[flags.user])
    except UserError:
        raise
    except Exception as error:  # lightkube raises several types for unusable configs
        if not flags.server or kubeconfig or context:
            raise UserError(f"cannot load kubeconfig: {type(error).__name__}: {error}") from error
        config = SingleConfig("", models.Context(cluster=""), models.Cluster(server=flags.server))
    cluster = config.cluster
    if flags.server:
        cluster = msgspec.structs.replace(cluster, server=flags.server)
    if flags.certificate_authority:
        ca = _path(flags.certificate_authority)
        cluster = msgspec.structs.replace(cluster, certificate_auth=ca, certificate_auth_data=None)
    if flags.insecure_skip_tls_verify:
        cluster = msgspec.structs.replace(
            cluster, insecure=True, certificate_auth=None, certificate_auth_data=None
        )
    user = config.user or models.User()
    if flags.token is not None:  # the token replaces the kubeconfig user's credentials
        user = models.User(token=flags.token)
    if flags.client_certificate or flags.client_key:
        user = msgspec.structs.replace(
            user,
            client_cert=_path(flags.client_certificate),
            client_cert_data=None,
            client_key=_path(flags.client_key),
            client_key_data=None,
        )
    return config._replace(cluster=cluster, user=user)


HELM_UNSUPPORTED: Final = (
    ("cluster", "--cluster"),
    ("user", "--user"),
    ("client_certificate", "--client-certificate"),
    ("client_key", "--client-key"),
    ("impersonate_uid", "--as-uid"),
)


def helm_env(flags: Overrides) -> dict[str, str]:
    """The override flags as helm's environment variables (helm has no ``--cluster``, ``--user``,
    client certificate or UID impersonation override: those are refused)."""
    refused = [flag for name, flag in HELM_UNSUPPORTED if getattr(flags, name)]
    if refused:
        raise UserError(f"helm takes no {', '.join(refused)}: set them in the kubeconfig and use --context")
    env = {
        "HELM_KUBEAPISERVER": flags.server,
        "HELM_KUBETOKEN": flags.token,
        "HELM_KUBEASUSER": flags.impersonate,
        "HELM_KUBEASGROUPS": ",".join(flags.impersonate_groups) or None,
        "HELM_KUBECAFILE": _path(flags.certificate_authority),
        "HELM_KUBEINSECURE_SKIP_TLS_VERIFY": "true" if flags.insecure_skip_tls_verify else None,
    }
    return {key: value for key, value in env.items() if value}


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace the kubeconfig context names (None when it names none)."""
    try:
        config = single_config(kubeconfig, context, overrides())
    except UserError:
        return None
    return config.context.namespace or None


def resolve_namespace(namespace: str | None, kubeconfig: str | None, context: str | None) -> str:
    """``-n`` when given, else the kubeconfig context's namespace, else ``default``."""
    return namespace or context_namespace(kubeconfig, context) or DEFAULT_NAMESPACE


def client(kubeconfig: str | None, context: str | None, *, field_manager: str | None = None) -> Client:
    """A lightkube client for the kubeconfig (flag, then KUBECONFIG, ~/.kube/config, in-cluster)
    and the command's override flags."""
    import httpx2
    from lightkube import Client

    flags = overrides()
    config = single_config(kubeconfig, context, flags)
    headers = flags.headers()
    try:
        kube = Client(
            config=config, timeout=httpx2.Timeout(flags.timeout_seconds()), field_manager=field_manager
        )
    except Exception as error:  # lightkube raises several types for unusable configs
        raise UserError(f"cannot load kubeconfig: {type(error).__name__}: {error}") from error
    if headers:  # lightkube has no impersonation setting: the headers go on its HTTP client
        http = kube._client._client
        http.headers = httpx2.Headers([*http.headers.multi_items(), *headers])
    return kube


@dataclass(frozen=True)
class Cluster:
    """Where a command reads: ``-n/--namespace``, ``--kubeconfig`` and ``--context``."""

    namespace: str
    kubeconfig: str | None
    context: str | None

    def client(self) -> Client:
        return client(self.kubeconfig, self.context)


def cluster_options(func: Callable[..., R]) -> Callable[..., R]:
    """``-n/--namespace`` and the connection flags, passed as one ``cluster``."""

    @functools.wraps(func)
    def command(
        *args: Any, namespace: str | None, kubeconfig: str | None, context: str | None, **kwargs: Any
    ) -> R:
        cluster = Cluster(resolve_namespace(namespace, kubeconfig, context), kubeconfig, context)
        return func(*args, cluster=cluster, **kwargs)

    return namespace_option()(connection_options(command))


def api_error(error: Exception) -> str:
    """What an API or transport error says, in one line (no traceback, no secrets)."""
    from lightkube.core.exceptions import ApiError

    if isinstance(error, ApiError):
        return f"{error.status.reason or 'Error'}: {error.status.message or error}"
    return f"{type(error).__name__}: {error}"


def get_or_none(kube: Client, resource: Any, name: str, namespace: str | None = None) -> Any:
    """The object as lightkube returns it, None when it (or its whole API, a CRD not yet
    installed) does not exist; any other error is raised."""
    import httpx2
    from lightkube.core.exceptions import ApiError

    try:
        return kube.get(resource, name, namespace=namespace)
    except ApiError as error:
        if error.status.code == 404:
            return None
        raise
    except httpx2.HTTPStatusError as error:
        if error.response.status_code == 404:
            return None
        raise


def read(kube: Client, resource: Any, name: str, namespace: str | None, what: str) -> dict[str, Any] | None:
    """The object as a dict, None when it does not exist; any other error ends the command
    with one line naming ``what`` was read. ``namespace`` None: a cluster-scoped object."""
    try:
        obj = get_or_none(kube, resource, name, namespace)
    except Exception as error:  # API and transport errors
        raise UserError(f"cannot read {what}: {api_error(error)}") from error
    if obj is None:
        return None
    data: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return data
