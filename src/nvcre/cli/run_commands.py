"""``nvcrectl workloadrun run`` and ``nvcrectl certification run`` (cli.md 4.2, 5.1).

Every flag is checked and the manifest validated offline (the checks of ``render``) before the
cluster is contacted; :mod:`nvcre.cli.run_execution` then creates and follows the run.
"""

from __future__ import annotations

import copy
import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

from nvcre.api.v1alpha1.constants import Default
from nvcre.cli import connection, run_execution
from nvcre.cli.common import UserError, load_validated, user_errors

if TYPE_CHECKING:
    from lightkube import Client

R = TypeVar("R")

MIN_DERIVED_TIMEOUT_SECONDS: Final = 30 * 60.0
WORKLOADRUN_TIMEOUT: Final = "30m"
DEADLINE_STOP_SECONDS: Final = 60.0


@dataclass(frozen=True)
class RunFlags:
    """The flags ``workloadrun run`` and ``certification run`` share, as the command line gave them."""

    wait: bool
    timeout: str | None
    cleanup: bool
    results_file: Path | None
    junit_file: Path | None
    html_file: Path | None
    workload_registry: str
    workload_registry_username: str
    workload_registry_password: str
    workload_registry_password_stdin: bool
    name: str
    max_nodes: int | None
    deadline: str | None
    setup: bool
    image: str
    controller_pull_secret: str
    kubeconfig: str | None
    context: str | None

    def check(self) -> None:
        """The flags that go together, checked before anything is installed or created.
        ``--image`` and ``--controller-pull-secret`` belong to ``--setup``, which reaches the
        cluster through helm too: only with the connection flags helm has."""
        if (self.results_file or self.junit_file or self.html_file) and not self.wait:
            raise UserError("--results-file, --junit-file and --html-file need --wait")
        if self.cleanup and not self.wait:  # it would delete the run as soon as it is created
            raise UserError("--cleanup needs --wait")
        if (self.image or self.controller_pull_secret) and not self.setup:
            raise UserError("--image and --controller-pull-secret need --setup")
        if self.setup:
            connection.helm_env(connection.overrides())

    def install(self) -> None:
        """``--setup``: ``nvcrectl setup init --auto-approve`` (its output, its errors); with
        ``--cleanup`` a failed install is reset."""
        from nvcre.cli.setup import init_command

        if not self.setup:
            return
        run_execution.note("[setup] Installing dependencies...")
        try:
            click.get_current_context().invoke(
                init_command,
                kubeconfig=self.kubeconfig,
                context=self.context,
                image=self.image or None,
                image_pull_secret=self.controller_pull_secret or None,
                auto_approve=True,
            )
        except SystemExit as exited:
            if exited.code and self.cleanup:
                self.uninstall()
            raise

    def uninstall(self) -> None:
        """``--setup`` with ``--cleanup``: ``nvcrectl setup reset --auto-approve``; a refusal or a
        failure is a warning (the run's own cleanup has already happened)."""
        from nvcre.cli.setup import reset_command

        try:
            click.get_current_context().invoke(
                reset_command, kubeconfig=self.kubeconfig, context=self.context, auto_approve=True
            )
        except SystemExit as exited:
            if exited.code:
                run_execution.note("Warning: setup reset failed (see above); nvcre stays installed")

    def limits(self) -> dict[str, Any]:
        """The spec fields ``--max-nodes`` and ``--deadline`` set (they win over the file's)."""
        from nvcre.api.v1alpha1.common import SHORT_DURATION_PATTERN
        from nvcre.durations import parse_duration

        fields: dict[str, Any] = {}
        if self.max_nodes is not None:
            fields["maxNodes"] = self.max_nodes
        if self.deadline is not None:
            if not re.fullmatch(SHORT_DURATION_PATTERN, self.deadline) or parse_duration(self.deadline) <= 0:
                raise UserError(
                    f'--deadline "{self.deadline}": give a duration longer than 0 in whole h, m, s or ms '
                    "(90m, 2h, 1h30m)"
                )
            fields["deadline"] = self.deadline
        return fields

    def registry(self, stdin_allowed: bool = True) -> run_execution.Registry | None:
        if self.workload_registry_password_stdin and not stdin_allowed:
            raise UserError(
                "--workload-registry-password-stdin cannot be used when the file is read from stdin"
            )
        return run_execution.registry_from_flags(
            self.workload_registry,
            self.workload_registry_username,
            self.workload_registry_password,
            self.workload_registry_password_stdin,
            sys.stdin.read,
        )

    def request(
        self,
        kind: run_execution.RunKind,
        document: dict[str, Any],
        created_line: Callable[[dict[str, Any]], list[str]],
        *,
        timeout: float,
        registry: run_execution.Registry | None,
    ) -> run_execution.RunRequest:
        self.check()
        return run_execution.RunRequest(
            kind,
            document,
            self.wait,
            timeout,
            self.cleanup,
            registry,
            self.results_file,
            self.junit_file,
            created_line,
            html_file=self.html_file,
            teardown=self.uninstall if self.setup and self.cleanup else None,
        )

    def connect(self) -> Client:
        return connection.client(self.kubeconfig, self.context)


HTML_FILE: Final = click.option(
    "--html-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the report as one self-contained HTML page.",
)


def run_options(func: Callable[..., R]) -> Callable[..., R]:
    """The flags ``workloadrun run`` and ``certification run`` share, passed as one ``flags``."""

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> R:
        flags = RunFlags(**{f.name: kwargs.pop(f.name) for f in fields(RunFlags)})
        return func(*args, flags=flags, **kwargs)

    options: list[Callable[[Any], Any]] = [
        click.option("--wait", is_flag=True, help="Follow the run to the end and print its report."),
        click.option("--timeout", default=None, help="How long --wait waits (a duration: 30m, 2h, 90s)."),
        click.option(
            "--cleanup",
            is_flag=True,
            help="Wait until the ended run's pods and workloads are gone (ResourcesReleased), then delete "
            "what this run created (and a namespace it created).",
        ),
        click.option(
            "--results-file", type=click.Path(path_type=Path, dir_okay=False), help="Write the JSON report."
        ),
        click.option(
            "--junit-file", type=click.Path(path_type=Path, dir_okay=False), help="Write a JUnit XML report."
        ),
        HTML_FILE,
        click.option("--workload-registry", default="", help="Registry of the workload images (nvcr.io)."),
        click.option("--workload-registry-username", default="", help="Its username (e.g. $oauthtoken)."),
        click.option("--workload-registry-password", default="", help="Its password or API key."),
        click.option(
            "--workload-registry-password-stdin", is_flag=True, help="Read the registry password from stdin."
        ),
        click.option("--name", default="", help="Name of the run (overrides the file's)."),
        click.option(
            "--max-nodes",
            type=click.IntRange(min=0),
            default=None,
            help="The most nodes the run may take (spec.maxNodes; 0: no limit): refused if its target has more.",
        ),
        click.option(
            "--deadline",
            default=None,
            help="Deadline of the whole run from its creation (spec.deadline: 90m, 2h); then it stops, Failed.",
        ),
        click.option(
            "--setup",
            is_flag=True,
            help="Install nvcre first (setup init --auto-approve); with --cleanup, setup reset at the end.",
        ),
        click.option("--image", default="", help="Controller image for --setup (setup init --image)."),
        click.option(
            "--controller-pull-secret",
            default="",
            help="Registry token for the controller image, for --setup (setup init --image-pull-secret).",
        ),
        connection.connection_options,
    ]
    for option in reversed(options):
        command = option(command)
    return command


def outlasting_deadline(seconds: float, document: dict[str, Any]) -> float:
    """The default wait, or longer: until the run's ``spec.deadline`` has ended it, plus a
    minute for it to stop what runs (a wait that gave up first would leave the run going)."""
    from nvcre.durations import parse_duration

    deadline = (document.get("spec") or {}).get("deadline")
    return max(seconds, parse_duration(str(deadline)) / 1e9 + DEADLINE_STOP_SECONDS) if deadline else seconds


# --- workloadrun run --------------------------------------------------------------------------------


def load_workloadrun(file: Path, name: str, namespace: str, fallback: str = "default") -> dict[str, Any]:
    """The WorkloadRun of FILE, validated as ``workloadrun render`` does; name and namespace set
    (``-n``, else the file's, else ``fallback``: the kubeconfig context's namespace)."""
    from nvcre.api.v1alpha1.workloadrun import WorkloadRun
    from nvcre.platform import architecture_from_node_selector
    from nvcre.render.workloadrun import BuildError, build_workflow

    document, run = load_validated(file, WorkloadRun)
    selector = run.spec.target.node_selector if run.spec.target else None
    # Offline the architecture only sizes the render; the controller detects it on the nodes,
    # so a target without a product label is checked as if on h100.
    arch = None if architecture_from_node_selector(selector or {}) else "h100"
    try:
        build_workflow(run, None, resolve=False, gpu_arch=arch)
    except BuildError as error:
        raise UserError(f"workloadrun {run.name}: {error}") from error
    document = copy.deepcopy(document)
    metadata = document.setdefault("metadata", {})
    if name:
        metadata["name"] = name
    metadata["namespace"] = namespace or metadata.get("namespace") or fallback
    document.setdefault("spec", {})
    return document


TEST_SCALES: Final = ("intra-node", "intra-rack", "full-scale")


def parse_node_list(text: str) -> list[str]:
    """``--node-list a,b,c``: node names, each non-empty, none twice."""
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise UserError(f'invalid --node-list "{text}": an empty node name')
    if len(set(names)) != len(names):
        raise UserError(f'invalid --node-list "{text}": a node named twice')
    return names


def apply_node_list(document: dict[str, Any], names: list[str]) -> None:
    """``spec.target.nodeNames``; ``numNodes`` lowered to the list's length, never raised."""
    spec = document["spec"]
    spec["target"] = {**(spec.get("target") or {}), "nodeNames": names}
    spec["numNodes"] = min(int(spec.get("numNodes") or len(names)), len(names))


def apply_test_scale(document: dict[str, Any], scale: str) -> None:
    spec = document["spec"]
    spec["orchestration"] = {**(spec.get("orchestration") or {}), "testScale": scale}


def apply_topology(document: dict[str, Any], nodes: list[dict[str, Any]], domain: str, key: str) -> None:
    """``--topology-domain``: the target narrowed to the nodes whose ``key`` label is ``domain``
    (``key`` empty: the detected platform's topology label), ``numNodes`` their count."""
    from nvcre.orchestration.discovery import discover
    from nvcre.platform import TOPOLOGY_KEYS, detect_platform

    spec = document["spec"]
    target = dict(spec.get("target") or {})
    if not key:
        platform = detect_platform(discover(nodes, target).nodes).platform
        key = TOPOLOGY_KEYS.get(platform, "")
        if not key:
            raise UserError(f'--topology-domain requires --topology-key on platform "{platform}"')
    expression = {"key": key, "operator": "In", "values": [domain]}
    target["matchExpressions"] = [*(target.get("matchExpressions") or []), expression]
    count = len(discover(nodes, target).nodes)
    if not count:
        raise UserError(
            f'--topology-domain "{domain}": no schedulable GPU node of the target has {key}={domain}'
        )
    spec["target"] = target
    spec["numNodes"] = count


def list_nodes(kube: Client) -> list[dict[str, Any]]:
    from lightkube.resources.core_v1 import Node

    try:
        return [node.to_dict() for node in kube.list(Node)]
    except Exception as error:  # API and transport errors
        raise UserError(f"cannot list nodes: {connection.api_error(error)}") from error


def workloadrun_created(document: dict[str, Any]) -> list[str]:
    metadata = document["metadata"]
    return [f"WorkloadRun {metadata['name']} created in namespace {metadata['namespace']}."]


@click.command("run")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, allow_dash=True))
@run_options
@click.option(
    "--node-list",
    default="",
    help="Comma list of nodes (spec.target.nodeNames); numNodes at most its length.",
)
@click.option(
    "--topology-domain",
    default="",
    help="Only the nodes of this topology domain (a matchExpression); numNodes: how many there are.",
)
@click.option(
    "--topology-key",
    default="",
    help="Node label of --topology-domain (default: the platform's, e.g. topology.k8s.aws/network-node-layer-1).",
)
@click.option(
    "--test-scale", type=click.Choice(TEST_SCALES), default=None, help="spec.orchestration.testScale."
)
@click.option(
    "-n", "--namespace", default="", help="Namespace (default: the file's, else the context's, else default)."
)
@user_errors
def workloadrun_run_command(
    file: Path,
    flags: RunFlags,
    node_list: str,
    topology_domain: str,
    topology_key: str,
    test_scale: str | None,
    namespace: str,
) -> None:
    """Create the WorkloadRun in FILE; with --wait, follow it and print its report."""
    if topology_key and not topology_domain:
        raise UserError("--topology-key needs --topology-domain")
    flags.check()
    registry = flags.registry(stdin_allowed=str(file) != "-")
    seconds = run_execution.parse_timeout(flags.timeout, flags.wait)
    names = parse_node_list(node_list) if node_list else None
    fallback = connection.resolve_namespace(None, flags.kubeconfig, flags.context)
    document = load_workloadrun(file, flags.name, namespace, fallback)
    document["spec"].update(flags.limits())
    if names is not None:
        apply_node_list(document, names)
    if test_scale is not None:
        apply_test_scale(document, test_scale)
    if seconds is None:
        seconds = outlasting_deadline(run_execution.parse_timeout(WORKLOADRUN_TIMEOUT, True) or 0.0, document)
    request = flags.request(
        run_execution.workloadrun_kind(),
        document,
        workloadrun_created,
        timeout=seconds or 0.0,
        registry=registry,
    )
    flags.install()
    kube = flags.connect()
    if topology_domain:  # the only flag that reads the cluster before the run is created
        apply_topology(document, list_nodes(kube), topology_domain, topology_key)
    run_execution.execute(kube, request)


# --- certification run ------------------------------------------------------------------------------


def parse_categories(values: tuple[str, ...]) -> list[tuple[str, str]]:
    """``--category domain/variant`` (repeatable, comma lists too), checked against the catalog."""
    from nvcre.catalog import CategoryNotFound, load_catalog

    pairs: list[tuple[str, str]] = []
    for value in values:
        for item in (part.strip() for part in value.split(",")):
            domain, slash, variant = item.partition("/")
            if not slash or not domain or not variant or "/" in variant:
                raise UserError(f'invalid category format "{item}": expected domain/variant')
            pairs.append((domain, variant))
    catalog = load_catalog()
    for domain, variant in pairs:
        try:
            catalog.lookup(domain, variant)
        except CategoryNotFound as error:  # the list of cli.md 4.2, one category a line
            known = "".join(f"\n  {key}" for key in error.known)
            click.echo(
                f'Error: unknown category "{domain}/{variant}"\n\nAvailable categories:{known}', err=True
            )
            sys.exit(1)
    return pairs


def derived_timeout(cert: dict[str, Any]) -> float:
    """cli.md 4.2: the longest category's per-job timeout x its iterations x 1.5, at least 30 m."""
    from nvcre.catalog import load_catalog
    from nvcre.durations import parse_duration

    catalog = load_catalog()
    spec = cert.get("spec") or {}
    longest = 0.0
    for category in spec.get("categories") or []:
        options = {**spec, **(category.get("options") or {})}
        entry = catalog.lookup(category["domain"], category["variant"])
        per_job = options.get("timeoutPerJob") or entry.default_timeout(
            options.get("testScale") or Default.TEST_SCALE
        )
        iterations = int(options.get("repeatCount") or 1)
        longest = max(longest, parse_duration(per_job) / 1e9 * iterations * 1.5)
    return max(longest, MIN_DERIVED_TIMEOUT_SECONDS)


def load_certification(file: Path, name: str, namespace: str) -> dict[str, Any]:
    """The Certification of FILE, validated; namespace: the file's, else ``-n``, else generated."""
    from nvcre.api.v1alpha1.certification import Certification

    document, cert = load_validated(file, Certification)
    parse_categories(tuple(f"{c.domain}/{c.variant}" for c in cert.spec.categories))
    document = copy.deepcopy(document)
    metadata = document.setdefault("metadata", {})
    if name:
        metadata["name"] = name
    metadata["namespace"] = metadata.get("namespace") or namespace or run_execution.generated_name()
    return document


def discover_product(kube: Client) -> str:
    """The one ``nvidia.com/gpu.product`` of the cluster's schedulable GPU nodes."""
    from lightkube.resources.core_v1 import Node

    from nvcre.api.v1alpha1.constants import NodeLabel

    try:
        nodes = list(kube.list(Node, labels={NodeLabel.GPU_PRESENT: "true"}))
    except Exception as error:
        raise UserError(f"cannot list nodes: {connection.api_error(error)}") from error
    nodes = [n for n in nodes if not (n.spec and n.spec.unschedulable)]
    if not nodes:
        raise UserError("no GPU nodes match target")
    products = {str((n.metadata.labels or {}).get(NodeLabel.GPU_PRODUCT, "")) for n in nodes if n.metadata}
    if products == {""}:
        raise UserError("no nodes have nvidia.com/gpu.product label")
    if len(products) > 1:
        raise UserError(f"heterogeneous GPUs: {', '.join(sorted(p or '(none)' for p in products))}")
    (product,) = products
    run_execution.note(f"Discovered GPU nodes with product: {product}")
    return product


def category_certification(
    pairs: list[tuple[str, str]], name: str, namespace: str, product: str, options: dict[str, Any]
) -> dict[str, Any]:
    """The Certification ``--category`` builds (cli.md 4.2)."""
    from nvcre.api.v1alpha1.constants import NodeLabel

    generated = run_execution.generated_name()
    return {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {
            "name": name or generated,
            "namespace": namespace or generated,
            "labels": {
                "app.kubernetes.io/managed-by": "cluster-readiness-engine",
                "app.kubernetes.io/created-by": "nvcrectl",
            },
        },
        "spec": {
            "target": {"nodeSelector": {NodeLabel.GPU_PRESENT: "true", NodeLabel.GPU_PRODUCT: product}},
            "categories": [{"domain": d, "variant": v} for d, v in pairs],
            **options,
        },
    }


STORAGE_CLASS_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True)
class CategoryFlags:
    """The ``certification run`` flags that set spec-level category options (cli.md 4.2): a number
    given as 0 and a switch not given leave the field to the file and the catalog."""

    nodes_per_job: int = 0
    gpus_per_node: int = 0
    repeat_count: int = 0
    max_steps: int = 0
    exit_duration_mins: int = 0
    max_restarts: int = 0
    storage_class: str = ""
    enable_checkpoint: bool | None = None
    enable_mnnvl: bool | None = None

    def spec(self) -> dict[str, Any]:
        """The Certification spec fields these flags set."""
        if self.storage_class and not (
            len(self.storage_class) <= 253 and STORAGE_CLASS_NAME.fullmatch(self.storage_class)
        ):
            raise UserError(
                f'invalid --storage-class "{self.storage_class}": a StorageClass name is lower-case letters, '
                "digits, '-' and '.' (at most 253), starting and ending with a letter or digit"
            )
        fields: dict[str, Any] = {
            key: value
            for key, value in (
                ("nodesPerJob", self.nodes_per_job),
                ("gpusPerNode", self.gpus_per_node),
                ("repeatCount", self.repeat_count),
                ("maxSteps", self.max_steps),
                ("exitDurationMins", self.exit_duration_mins),
                ("maxRestarts", self.max_restarts),
                ("storageClassName", self.storage_class),
            )
            if value
        }
        if self.enable_checkpoint is not None:
            fields["enableCheckpoint"] = self.enable_checkpoint
        if self.enable_mnnvl is not None:
            fields["enableMNNVL"] = self.enable_mnnvl
        return fields


def category_flag_options(func: Callable[..., R]) -> Callable[..., R]:
    """The :class:`CategoryFlags` options, passed as one ``category_flags``."""

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> R:
        flags = CategoryFlags(**{f.name: kwargs.pop(f.name) for f in fields(CategoryFlags)})
        return func(*args, category_flags=flags, **kwargs)

    count = click.IntRange(min=0)
    options: list[Callable[[Any], Any]] = [
        click.option("--nodes-per-job", type=count, default=0, help="Nodes per group (0: auto)."),
        click.option("--gpus-per-node", type=count, default=0, help="GPUs per node (0: auto)."),
        click.option("--repeat-count", type=count, default=0, help="Iterations (0: the catalog's)."),
        click.option(
            "--max-steps",
            type=click.IntRange(min=-1),
            default=0,
            help="Training steps (spec.maxSteps; 0: the catalog's, -1: until --exit-duration-mins).",
        ),
        click.option(
            "--exit-duration-mins", type=count, default=0, help="Training minutes (spec.exitDurationMins)."
        ),
        click.option(
            "--max-restarts",
            type=count,
            default=0,
            help="Checkpoint restarts (spec.maxRestarts; 0: the catalog's).",
        ),
        click.option(
            "--storage-class", default="", help="StorageClass of checkpoint volumes (spec.storageClassName)."
        ),
        click.option(
            "--enable-checkpoint/--no-enable-checkpoint",
            default=None,
            help="Checkpoint training (spec.enableCheckpoint; when not given: the file's, else the catalog's).",
        ),
        click.option(
            "--enable-mnnvl/--no-enable-mnnvl",
            default=None,
            help="Multi-node NVLink, NCCL_MNNVL_ENABLE=1 (spec.enableMNNVL; when not given: detected).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def certification_created(document: dict[str, Any]) -> list[str]:
    metadata = document["metadata"]
    lines = [f"Certification {metadata['name']} created in namespace {metadata['namespace']}.", "Categories:"]
    return lines + [f"  - {c['domain']}/{c['variant']}" for c in document["spec"]["categories"]]


@click.command("run")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False), required=False)
@click.option(
    "--cert-file", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Certification YAML."
)
@click.option(
    "--category", "categories", multiple=True, help="DOMAIN/VARIANT to certify (repeatable, or a comma list)."
)
@run_options
@category_flag_options
@click.option(
    "-n",
    "--namespace",
    default="",
    help="Namespace (default: the file's, else the context's when it names one, else nvcrectl-<ts>).",
)
@user_errors
def certification_run_command(
    file: Path | None,
    cert_file: Path | None,
    categories: tuple[str, ...],
    flags: RunFlags,
    category_flags: CategoryFlags,
    namespace: str,
) -> None:
    """Certify the cluster: the Certification in FILE (--cert-file), or --category DOMAIN/VARIANT.

    With --wait, follow it and print its report; without --timeout it waits for the longest
    category's per-job timeout times its iterations times 1.5, at least 30 minutes.
    """
    if file is not None and cert_file is not None:
        raise UserError("give the Certification file once: as FILE or as --cert-file")
    cert_file = cert_file or file
    if cert_file is not None and categories:
        raise UserError("--cert-file and --category are mutually exclusive")
    if cert_file is None and not categories:
        raise UserError(
            "either --cert-file or at least one --category is required "
            "(see `nvcrectl certification list-categories`)"
        )
    registry = flags.registry()
    pairs = parse_categories(categories) if categories else []
    seconds = run_execution.parse_timeout(flags.timeout, flags.wait)
    options = {**category_flags.spec(), **flags.limits()}
    namespace = namespace or connection.context_namespace(flags.kubeconfig, flags.context) or ""
    document: dict[str, Any] | None = None
    if cert_file is not None:
        document = load_certification(cert_file, flags.name, namespace)
    if document is not None and options:
        document["spec"].update(options)
    flags.check()
    flags.install()
    kube = flags.connect()
    if document is None:
        document = category_certification(pairs, flags.name, namespace, discover_product(kube), options)
    if seconds is None:
        seconds = outlasting_deadline(derived_timeout(document), document)
    request = flags.request(
        run_execution.certification_kind(),
        document,
        certification_created,
        timeout=seconds,
        registry=registry,
    )
    run_execution.execute(kube, request)
