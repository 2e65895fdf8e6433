"""``nvcrectl mcp serve``: a read-only Model Context Protocol server on stdio (cli.md 8).

Assistants read Certifications, WorkloadRuns, their reports and failed nodes, NodeRecords and the
catalog, and judge a pasted nccl-tests log or dcgmi diag output, through the same functions as
the CLI commands that print them (one implementation of each). The server holds a
:class:`ReadOnlyClient`, which can only get and list: no tool can create, change or delete
anything. stdout carries the protocol only; warnings go to stderr. The ``mcp`` SDK is imported when the server starts, so the other
commands never load it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

import click

from nvcre import __version__
from nvcre.cli import connection
from nvcre.cli.common import UserError, user_errors

if TYPE_CHECKING:
    from lightkube import Client
    from mcp.server.mcpserver import MCPServer

SERVER_NAME: Final = "nvcre"
USER_AGENT: Final = f"nvcrectl-mcp/{__version__}"
"""The user agent of the server's requests: an API server's audit log tells them apart."""
DEFAULT_NAMESPACE: Final = "default"
NCCL_PROFILE: Final = "nccl-bandwidth"
"""The built-in LogProfile ``analyze_nccl_log`` reads with (``nvcrectl analyze nccl``'s default)."""

T = TypeVar("T")
ReportFormat = Literal["text", "json"]
RunKind = Literal["Certification", "WorkloadRun"]


class ReadOnlyClient:
    """A cluster client that can get and list, and nothing else: it has no create, patch,
    replace, apply or delete, so nothing that holds it can write."""

    __slots__ = ("_client",)

    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        return self._client.get(resource, name, namespace=namespace)

    def list(
        self,
        resource: Any,
        *,
        namespace: str | None = None,
        labels: Any = None,
        chunk_size: int | None = None,
    ) -> Iterable[Any]:
        return self._client.list(resource, namespace=namespace, labels=labels, chunk_size=chunk_size)


def _json(data: T) -> T:
    """``data`` as JSON values (timestamps as their text)."""
    return cast(T, json.loads(json.dumps(data, default=str)))


def failed_node_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The failed nodes of a JSON report, one row per distinct (category, node, reason, message):
    a node that failed in two categories is listed under each (the report's own ``failedNodes``
    keeps one finding per node)."""
    rows = [
        {"category": f"{card['domain']}/{card['variant']}", **finding}
        for card in report.get("categories") or ()
        for group in card.get("failedGroups") or ()
        for finding in group.get("failedNodes") or ()
    ]
    listed = {row["name"] for row in rows}
    rows += [row for row in report.get("failedNodes") or () if row["name"] not in listed]
    distinct: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        distinct.setdefault((row.get("category"), row["name"], row.get("reason"), row.get("message")), row)
    return list(distinct.values())


class Tools:
    """The tools' work: each reads through ``kube`` and calls the CLI's own function."""

    def __init__(self, kube: ReadOnlyClient) -> None:
        # The report and status readers are typed for lightkube's Client; they only get and list.
        self.kube = cast("Client", kube)

    def list_categories(self) -> list[dict[str, Any]]:
        from nvcre.catalog import load_catalog

        return [entry.to_dict() for entry in load_catalog().list()]

    def list_certifications(self, namespace: str) -> list[dict[str, Any]]:
        from nvcre.cli.status_commands import certification_summaries

        return _json(certification_summaries(self.kube, namespace))

    def list_workloadruns(self, namespace: str) -> list[dict[str, Any]]:
        from nvcre import resources
        from nvcre.conditions import run_state

        try:
            found = [r.to_dict() for r in self.kube.list(resources.WorkloadRun, namespace=namespace)]
        except Exception as error:  # API and transport errors
            raise UserError(f"cannot list workloadruns: {connection.api_error(error)}") from error
        out = []
        for run in sorted(found, key=lambda r: str(r["metadata"]["name"])):
            status, reason, message = run_state(run)
            row = {"name": run["metadata"]["name"], "namespace": namespace, "status": status}
            out.append(row | {k: v for k, v in (("reason", reason), ("message", message)) if v})
        return out

    def report(self, kind: RunKind, name: str, namespace: str) -> Any:
        from nvcre.cli.report_io import read_certification_report, read_workloadrun_report

        read = read_certification_report if kind == "Certification" else read_workloadrun_report
        return read(self.kube, name, namespace)

    def report_output(
        self, kind: RunKind, name: str, namespace: str, output: ReportFormat
    ) -> str | dict[str, Any]:
        from nvcre.report.jsonreport import to_json
        from nvcre.report.text import render_text

        report = self.report(kind, name, namespace)
        return render_text(report) if output == "text" else to_json(report)

    def failed_nodes(self, kind: RunKind, name: str, namespace: str) -> list[dict[str, Any]]:
        from nvcre.report.jsonreport import to_json

        return failed_node_rows(to_json(self.report(kind, name, namespace)))

    def certification_status(self, name: str, namespace: str) -> dict[str, Any]:
        from nvcre import resources
        from nvcre.cli.status_commands import certification_summary

        cert = connection.read(self.kube, resources.Certification, name, namespace, f"certification {name}")
        if cert is None:
            raise UserError(f'certification "{name}" not found in namespace "{namespace}"')
        summary = certification_summary(cert)
        report = self.report("Certification", name, namespace)
        out = {
            "name": name,
            "namespace": namespace,
            "result": report.result,
            "status": summary["status"],
            "conditions": (cert.get("status") or {}).get("conditions") or [],
            "categories": summary["categories"],
            "excludedNodes": list(report.excluded_nodes),
            "failedNodes": sorted({f.node for f in report.failed_nodes}),
        }
        if report.exclusion_reason:
            out["exclusionReason"] = report.exclusion_reason
        return _json(out)

    def node_record(self, node: str) -> dict[str, Any]:
        from nvcre.cli.fleet_commands import read_history

        return _json(read_history(self.kube, node))

    def analyze_nccl_log(
        self, log: str, thresholds: dict[str, str], expect_transport: str | None, nodes: int | None
    ) -> dict[str, Any]:
        from nvcre.cli.analyze.common import load_profile, with_verdict
        from nvcre.cli.analyze.nccl import judge_nccl_log
        from nvcre.measure.lines import read_lines
        from nvcre.measure.nccl import Parser

        status, verdict = judge_nccl_log(
            Parser(load_profile(NCCL_PROFILE)),
            read_lines(io.BytesIO(log.encode())),
            source="the pasted log",
            profile=NCCL_PROFILE,
            thresholds=thresholds,
            expect_transport=expect_transport,
            nodes=nodes,
        )
        return _json(with_verdict(status, verdict))

    def analyze_dcgm_log(self, log: str, level: int | None) -> dict[str, Any]:
        from nvcre.cli.analyze.common import with_verdict
        from nvcre.cli.analyze.dcgm import dcgm_status
        from nvcre.decide.job.diagnostics import verdict
        from nvcre.measure.dcgm import read_diag

        diagnosis = read_diag(log, level=level)
        return _json(with_verdict(dcgm_status(diagnosis), verdict(diagnosis)))


def build_server(kube: ReadOnlyClient) -> MCPServer:
    """The MCP server and its tools, every one annotated read-only."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ToolAnnotations

    tools = Tools(kube)
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=__version__,
        log_level="WARNING",  # on stderr: a failed tool, not every request the tools make
        instructions=(
            "Read-only access to the NVIDIA Cluster Readiness Engine: Certifications, WorkloadRuns, "
            "their reports and failed nodes, nodes' records, the catalog, and the judging of a "
            "pasted nccl-tests log or dcgmi diag output. Nothing here can change the cluster."
        ),
    )
    read_only = ToolAnnotations(
        readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
    )

    def call(work: Callable[..., T], *args: Any) -> T:
        try:
            return work(*args)
        except UserError as error:
            raise ToolError(error.message) from error

    @server.tool(annotations=read_only)
    def list_categories() -> list[dict[str, Any]]:
        """The catalog's certification categories (domain/variant, framework, what each runs)."""
        return call(tools.list_categories)

    @server.tool(annotations=read_only)
    def list_certifications(namespace: str = DEFAULT_NAMESPACE) -> list[dict[str, Any]]:
        """The Certifications of a namespace: status, reason and each category's status."""
        return call(tools.list_certifications, namespace)

    @server.tool(annotations=read_only)
    def list_workloadruns(namespace: str = DEFAULT_NAMESPACE) -> list[dict[str, Any]]:
        """The WorkloadRuns of a namespace: status (Pending, InProgress, Succeeded, Failed) and reason."""
        return call(tools.list_workloadruns, namespace)

    @server.tool(annotations=read_only)
    def get_certification_status(name: str, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        """A Certification's result (PASSED, INCOMPLETE, FAILED, RUNNING: authoritative), its raw
        conditions, each category's status, excluded nodes and why, and the failed nodes' names."""
        return call(tools.certification_status, name, namespace)

    @server.tool(annotations=read_only)
    def get_certification_report(
        name: str, namespace: str = DEFAULT_NAMESPACE, format: ReportFormat = "text"
    ) -> str | dict[str, Any]:
        """The report `nvcrectl certification report` prints (text), or its JSON form (json)."""
        return call(tools.report_output, "Certification", name, namespace, format)

    @server.tool(annotations=read_only)
    def get_workloadrun_report(
        name: str, namespace: str = DEFAULT_NAMESPACE, format: ReportFormat = "text"
    ) -> str | dict[str, Any]:
        """The report `nvcrectl workloadrun report` prints (text), or its JSON form (json)."""
        return call(tools.report_output, "WorkloadRun", name, namespace, format)

    @server.tool(annotations=read_only)
    def list_failed_nodes(
        name: str, namespace: str = DEFAULT_NAMESPACE, kind: RunKind = "Certification"
    ) -> list[dict[str, Any]]:
        """The failed nodes of a Certification (or WorkloadRun): one row per distinct category,
        node, reason and message (a node can appear more than once), with the group, the cause
        and the measured value."""
        return call(tools.failed_nodes, kind, name, namespace)

    @server.tool(annotations=read_only)
    def get_node_record(node: str) -> dict[str, Any]:
        """What nvcre remembers of a node (its NodeRecord, as `nvcrectl node history` shows it):
        its state and every result kept, oldest first, with verdict and cause."""
        return call(tools.node_record, node)

    @server.tool(annotations=read_only)
    def analyze_nccl_log(
        log: str,
        thresholds: dict[str, str] | None = None,
        expect_transport: str | None = None,
        nodes: int | None = None,
    ) -> dict[str, Any]:
        """Judge a pasted nccl-tests log as `nvcrectl analyze nccl` does (the Job controller's
        judge): bandwidth per message size, busBandwidthGBps, and the verdict. `thresholds` maps a
        key to a CEL expression over `value` (busBandwidthGBps: "value >= 400")."""
        return call(tools.analyze_nccl_log, log, thresholds or {}, expect_transport, nodes)

    @server.tool(annotations=read_only)
    def analyze_dcgm_log(log: str, level: int | None = None) -> dict[str, Any]:
        """Judge a pasted `dcgmi diag` output (its --json report or its table) as `nvcrectl
        analyze dcgm` and a DCGM category's Job do: each test on each GPU with DCGM's message, the
        summary and the verdict. `level`: the run level when the output does not show it."""
        return call(tools.analyze_dcgm_log, log, level)

    return server


@click.group("mcp")
def mcp_group() -> None:
    """A read-only Model Context Protocol server for assistants."""


@mcp_group.command("serve")
@connection.connection_options
@user_errors
def serve_command(kubeconfig: str | None, context: str | None) -> None:
    """Serve MCP on stdin/stdout: tools that read Certifications, WorkloadRuns, reports, failed
    nodes and NodeRecords, list the catalog and judge a pasted nccl-tests log or dcgmi diag
    output. It never creates, changes or deletes anything. Client config:
    {"mcpServers": {"nvcre": {"command": "nvcrectl", "args": ["mcp", "serve"]}}}"""
    kube = connection.client(kubeconfig, context)
    kube._client._client.headers["User-Agent"] = USER_AGENT  # lightkube has no parameter for it
    build_server(ReadOnlyClient(kube)).run("stdio")
