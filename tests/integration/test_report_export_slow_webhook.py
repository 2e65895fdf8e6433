"""A webhook that does not answer holds up nothing else: with one worker per controller
(``--max-concurrent-reconciles=1``), while one export's POST waits for its webhook, an export of
the same Certification made after it is delivered to a webhook that answers. (A POST made inside
a reconcile would hold that one worker, and the second export would wait for the first webhook.)

Both POSTs carry the report's identity: the same ``X-Nvcre-Report-ID`` (the Certification's
UID) from both policies' exports, and the manager's ``--cluster-id``.

The manager is this module's own (no other runs here, so each report is sent by it alone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightkube import Client

from nvcre import resources
from nvcre.api.v1alpha1.reportexport import CLUSTER_HEADER, DELIVERY_HEADER, REPORT_HEADER
from nvcre.testing.builders import new_pool
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.waiting import wait_for
from nvcre.testing.webhook import Webhook, policy, run_certification


def _phase(kube: Client, namespace: str, policy_name: str) -> dict[str, Any] | None:
    """The export of ``policy_name`` in ``namespace``, once it has a phase."""
    for item in kube.list(resources.ReportExport, namespace=namespace):
        export = item.to_dict()
        if export["spec"]["policyRef"]["name"] == policy_name and (export.get("status") or {}).get("phase"):
            return dict(export)
    return None


def test_a_webhook_that_does_not_answer_delays_no_other_export(
    kube: Client, namespace: str, gpu_nodes: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    manager = ManagerProcess(
        control_plane,
        tmp_path,
        name="one-worker",
        extra_args=("--max-concurrent-reconciles=1", "--cluster-id=lab-east"),
    ).start()
    silent, answering = Webhook([200], held=True), Webhook([200])
    try:
        with silent.serving(), answering.serving():
            body = policy("silent", namespace, silent, timeout="5m")
            kube.create(resources.ReportExportPolicy.from_dict(body))
            cert = run_certification(kube, namespace, new_pool(gpu_nodes, 2)[0], "both", "silent")
            wait_for(lambda: silent.requests() or None, 90, what="the silent webhook's request")

            # Only now the second policy, selecting the same Certification: its export is made
            # and sent while the first POST waits.
            body = policy("answering", namespace, answering)
            body["spec"]["source"]["selector"] = {"matchLabels": {"export": "silent"}}
            kube.create(resources.ReportExportPolicy.from_dict(body))
            delivered = wait_for(
                lambda: (
                    (e := _phase(kube, namespace, "answering")) and e["status"]["phase"] == "Delivered" and e
                ),
                90,
                what="the answering webhook's export delivered",
            )
            held = _phase(kube, namespace, "silent")
            assert held is not None and held["status"]["phase"] == "SnapshotReady", held
            assert "attempts" not in held["status"]  # its POST is still waiting
            assert delivered["status"]["attempts"] == 1

            silent.release()
            done = wait_for(
                lambda: (
                    (e := _phase(kube, namespace, "silent")) and e["status"]["phase"] == "Delivered" and e
                ),
                90,
                what="the silent webhook's export delivered once it answered",
            )
            assert done["status"]["attempts"] == 1 and len(silent.requests()) == 1
        uid = cert["metadata"]["uid"]
        for export, webhook in ((done, silent), (delivered, answering)):
            assert (export["spec"]["reportID"], export["status"]["reportID"]) == (uid, uid)
            assert export["spec"]["clusterID"] == "lab-east"
            (received,) = webhook.requests()
            assert received.headers[REPORT_HEADER] == uid
            assert received.headers[CLUSTER_HEADER] == "lab-east"
            assert received.headers[DELIVERY_HEADER] == export["metadata"]["uid"]  # one per export
    finally:
        manager.stop()
