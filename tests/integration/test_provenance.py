"""Provenance on the real API server: the digest of each rendered Workflow spec and the images a
run's pods really ran (their ``imageID``) reach the Workflow's, the Certification's and the
WorkloadRun's status, the JSON report and the JUnit properties; a pod that ran an image the
spec does not name is said in status, a Warning event and the report.

The test plays Kubeflow Trainer, JobSet and the kubelet: it creates the pods of each TrainJob as
JobSet would, reports their containers' image and imageID as a kubelet does, and ends the
TrainJob. The Workflow, Job, Certification and WorkloadRun controllers are real.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from nvcre import resources
from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.cli.main import cli
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import Certification, WorkloadRun, category, new_pool
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import finish_job, get, jobs_of, trainjob_of, wait_event, wait_true
from nvcre.testing.kwok import PHASE_ANNOTATION
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import create_trainjob_pods, replace_status

PYTORCH = "nvcr.io/nvidia/pytorch:26.01-py3"
SWAPPED = "nvcr.io/nvidia/pytorch:25.01-py3"
MPI = {"mpi": {"binary": "/usr/local/bin/all_reduce_perf_mpi", "mpirunPath": "/usr/local/mpi/bin/mpirun"}}
ALL_REDUCE = category("communication", "nccl-all-reduce")
ALL_REDUCE_KEY = "communication/nccl-all-reduce"
STARTED = "2026-01-01T00:00:00Z"

PINNED = "nvcr.io/nvidia/pytorch:26.01-py3@sha256:" + "a" * 64
OTHER_DIGEST = "nvcr.io/nvidia/pytorch@sha256:" + "b" * 64

Kubelet = Callable[[str, str], tuple[str, str]]
"""What the kubelet reports a container (of a pod, by name) ran, given the image its spec names:
the image and its imageID."""


def image_id(image: str) -> str:
    """The imageID a kubelet reports for ``image``: its repository and a digest of its own."""
    repository = image.split("@")[0].rsplit(":", 1)[0]
    return f"{repository}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def as_specified(pod: str, image: str) -> tuple[str, str]:
    return image, image_id(image)


def canonical_digest(spec: dict[str, Any]) -> str:
    """The documented spec digest: sha256 of the spec as JSON, keys sorted, no spaces, UTF-8."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _statuses(containers: list[dict[str, Any]], pod: str, kubelet: Kubelet) -> list[dict[str, Any]]:
    out = []
    for container in containers:
        image, digest = kubelet(pod, container["image"])
        out.append(
            {
                "name": container["name"],
                "image": image,
                "imageID": digest,
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": STARTED}},
            }
        )
    return out


def run_job(kube: Client, namespace: str, job: str, kubelet: Kubelet = as_specified) -> set[tuple[str, str]]:
    """Create the Job's pods, report each container's image and imageID as ``kubelet`` says
    (the spec's image by default), wait until the Job records them and end its TrainJob; the
    (image, imageID) pairs reported."""
    trainjob = trainjob_of(kube, namespace, job)["metadata"]["name"]
    # kwok leaves them to this test: it plays their kubelet
    pods = create_trainjob_pods(kube, namespace, trainjob, annotations={PHASE_ANNOTATION: "Pending"})
    reported: set[tuple[str, str]] = set()
    for pod in pods:
        name = pod["metadata"]["name"]
        status: dict[str, Any] = {
            "phase": "Succeeded",
            "containerStatuses": _statuses(pod["spec"]["containers"], name, kubelet),
        }
        if pod["spec"].get("initContainers"):
            status["initContainerStatuses"] = _statuses(pod["spec"]["initContainers"], name, kubelet)
        reported |= {(s["image"], s["imageID"]) for s in status["containerStatuses"]}
        reported |= {(s["image"], s["imageID"]) for s in status.get("initContainerStatuses") or ()}

        def report(name: str = name, status: dict[str, Any] = status) -> bool:
            live = get(kube, Pod, name, namespace)
            live["status"] = status
            return replace_status(kube, Pod, live)

        wait_for(report, 30, what=f"pod {name}'s status written")

    def recorded() -> bool:
        images = (get(kube, resources.Job, job, namespace).get("status") or {}).get("images") or ()
        return {(i["image"], i["imageID"]) for i in images} == reported

    wait_for(recorded, 120, what=f"Job {job} recording its pods' images")
    finish_job(kube, namespace, job)
    return reported


def expected_images(reported: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """Each image reported, under its own name (the one the spec rendered), with its imageIDs."""
    by_image: dict[str, list[str]] = {}
    for image, digest in reported:
        by_image.setdefault(image, []).append(digest)
    return [{"image": image, "imageIDs": sorted(by_image[image])} for image in sorted(by_image)]


def _cli(control_plane: ControlPlane, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--kubeconfig", str(control_plane.kubeconfig_path)])


def _properties(junit: Path, category: str) -> list[tuple[str, str]]:
    """The suite's properties of ``category`` (``<domain>/<variant>/...``), in order."""
    root = ET.fromstring(junit.read_text())
    found = [(p.get("name", ""), p.get("value", "")) for p in root.iter("property")]
    return [(name, value) for name, value in found if name.startswith(f"{category}/")]


def test_a_runs_spec_digest_and_the_images_its_pods_ran_reach_status_and_report(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    pool, _ = new_pool(gpu_nodes, 2)
    run = WorkloadRun("prov").namespace(namespace).image(PYTORCH).framework(MPI).nodes(2).pool(pool).obj()
    kube.create(resources.WorkloadRun.from_dict(run))
    (job,) = wait_for(lambda: sorted(jobs_of(kube, namespace, "prov")) or None, 60, what="the run's Job")
    reported = run_job(kube, namespace, job)
    done = wait_true(kube, resources.WorkloadRun, "prov", namespace, "Succeeded", timeout=90)

    workflow = get(kube, resources.Workflow, "prov", namespace)
    provenance = {"specDigest": canonical_digest(workflow["spec"]), "images": expected_images(reported)}
    assert PYTORCH in {i["image"] for i in provenance["images"]}
    assert workflow["status"]["provenance"] == provenance
    assert done["status"]["provenance"] == provenance

    junit = tmp_path / "junit.xml"
    data = _cli(
        control_plane,
        "workloadrun",
        "report",
        "prov",
        "-n",
        namespace,
        "-o",
        "json",
        "--junit-file",
        str(junit),
    )
    assert data.exit_code == 0, data.output
    assert json.loads(data.stdout)["categories"][0]["provenance"] == provenance
    assert _properties(junit, "workloadrun/prov") == [
        ("workloadrun/prov/specDigest", provenance["specDigest"]),
        *(
            ("workloadrun/prov/image", f"{i['image']} {d}")
            for i in provenance["images"]
            for d in i["imageIDs"]
        ),
    ]
    text = _cli(control_plane, "workloadrun", "report", "prov", "-n", namespace)
    assert "│  Provenance:" in text.stdout
    assert f"│    Spec:  {provenance['specDigest'][:19]} " in text.stdout
    assert f"│    ✓  {PYTORCH} " in text.stdout and "✗" not in text.stdout


def test_a_pod_that_ran_an_image_the_spec_does_not_name_is_reported_as_a_mismatch(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    pool, _ = new_pool(gpu_nodes, 2)
    cert = (
        Certification("swapped")
        .namespace(namespace)
        .pool(pool, **{NodeLabel.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"})
    )
    kube.create(resources.Certification.from_dict(cert.allow_missing_data().categories(ALL_REDUCE).obj()))
    name = certification_workflow_name("swapped", ALL_REDUCE["domain"], ALL_REDUCE["variant"])
    (job,) = wait_for(lambda: sorted(jobs_of(kube, namespace, name)) or None, 60, what="the category's Job")
    swapped_pod: list[str] = []

    def swap(pod: str, image: str) -> tuple[str, str]:
        """The first container of the first pod runs another image than its spec names (a
        registry mirror or an admission webhook rewrote it)."""
        if not swapped_pod:
            swapped_pod.append(pod)
            return SWAPPED, image_id(SWAPPED)
        return as_specified(pod, image)

    reported = run_job(kube, namespace, job, swap)
    mismatch = f"a pod ran {SWAPPED}, which the rendered spec does not name"
    wait_event(kube, namespace, name, "Workflow", ("Warning", "ImageMismatch", mismatch), timeout=30)
    said = ("Warning", "ImageMismatch", f"Category {ALL_REDUCE_KEY}: {mismatch}")
    wait_event(kube, namespace, "swapped", "Certification", said, timeout=30)
    cert_done = wait_true(kube, resources.Certification, "swapped", namespace, "Succeeded", timeout=90)

    workflow = get(kube, resources.Workflow, name, namespace)
    images = expected_images(reported)
    for entry in images:
        if entry["image"] == SWAPPED:
            entry["mismatch"] = mismatch
    provenance = {"specDigest": canonical_digest(workflow["spec"]), "images": images}
    assert workflow["status"]["provenance"] == provenance
    assert cert_done["status"]["categoryStatuses"][0]["provenance"] == provenance

    junit, results = tmp_path / "junit.xml", tmp_path / "results.json"
    files = ("--results-file", str(results), "--junit-file", str(junit))
    data = _cli(control_plane, "certification", "report", "swapped", "-n", namespace, *files)
    assert data.exit_code == 0, data.output
    assert json.loads(results.read_text())["categories"][0]["provenance"] == provenance
    assert ("communication/nccl-all-reduce/imageMismatch", mismatch) in _properties(junit, ALL_REDUCE_KEY)
    assert ("communication/nccl-all-reduce/image", f"{SWAPPED} {image_id(SWAPPED)}") in _properties(
        junit, ALL_REDUCE_KEY
    )
    assert f"│    ✗  {SWAPPED} " in data.stdout
    wrapped = [line[1:-1].strip() for line in data.stdout.splitlines() if line.startswith("│         ")]
    assert mismatch in " ".join(wrapped)  # the card wraps it under the image
    page = _cli(control_plane, "certification", "report", "swapped", "-n", namespace, "-o", "html")
    assert (
        f'<li class="bad"><code>{SWAPPED}</code> ran as <code>{image_id(SWAPPED)}</code>: {mismatch}</li>'
        in page.stdout
    )


def test_an_image_pinned_by_digest_that_ran_as_another_digest_is_a_mismatch_of_the_run(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 2)
    run = WorkloadRun("pinned").namespace(namespace).image(PINNED).framework(MPI).nodes(2).pool(pool).obj()
    kube.create(resources.WorkloadRun.from_dict(run))
    (job,) = wait_for(lambda: sorted(jobs_of(kube, namespace, "pinned")) or None, 60, what="the run's Job")

    def moved(pod: str, image: str) -> tuple[str, str]:
        """The registry serves the pinned image's repository at another digest."""
        return (image, OTHER_DIGEST) if image == PINNED else as_specified(pod, image)

    reported = run_job(kube, namespace, job, moved)
    mismatch = f"a pod ran {PINNED} as sha256:{'b' * 64}, not the pinned sha256:{'a' * 64}"
    said = ("Warning", "ImageMismatch", mismatch)
    wait_event(kube, namespace, "pinned", "Workflow", said, timeout=30)
    wait_event(kube, namespace, "pinned", "WorkloadRun", said, timeout=30)
    done = wait_true(kube, resources.WorkloadRun, "pinned", namespace, "Succeeded", timeout=90)

    images = expected_images(reported)
    for entry in images:
        if entry["image"] == PINNED:
            entry["mismatch"] = mismatch
    assert {"image": PINNED, "imageIDs": [OTHER_DIGEST], "mismatch": mismatch} in images
    assert done["status"]["provenance"]["images"] == images
