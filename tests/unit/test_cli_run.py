"""``workloadrun run`` and ``certification run``: every flag and the manifest are checked before
the cluster is contacted (cli.md 14, acceptance cases 3-5), and the registry password stays out
of what the commands print."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from nvcre.cli import connection, run_execution
from nvcre.testing.builders import Certification
from tests.unit.cli_invoke import invoke, write_yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CERT = Certification("c1").target({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}).obj()


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail any command that reaches for a cluster connection."""
    calls: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        calls.append("client")
        raise AssertionError("the command contacted the cluster")

    monkeypatch.setattr(connection, "client", refuse)
    return calls


@pytest.fixture
def cert_file(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "cert.yaml", CERT)


def test_cert_file_and_category_are_mutually_exclusive(cert_file: Path) -> None:  # acceptance 3
    code, out = invoke(
        "certification", "run", "--category", "communication/nccl-all-reduce", "--cert-file", str(cert_file)
    )
    assert code == 1
    assert out == "Error: --cert-file and --category are mutually exclusive\n"


def test_a_category_without_a_slash_is_refused() -> None:  # acceptance 4
    code, out = invoke("certification", "run", "--category", "nccl-all-reduce")
    assert (code, out) == (1, 'Error: invalid category format "nccl-all-reduce": expected domain/variant\n')


@pytest.mark.parametrize(
    "flags",
    [
        ["--workload-registry", "nvcr.io"],
        ["--workload-registry", "nvcr.io", "--workload-registry-username", "$oauthtoken"],
        ["--workload-registry-password", "s3cret"],
    ],
)
def test_registry_flags_go_together(flags: list[str]) -> None:  # acceptance 5
    code, out = invoke("certification", "run", "--category", "communication/nccl-all-reduce", *flags)
    assert code == 1
    assert "must all be set together and non-empty" in out
    assert "s3cret" not in out
    code, out = invoke("workloadrun", "run", str(EXAMPLES / "workloadrun" / "basic.yaml"), *flags)
    assert code == 1 and "must all be set together and non-empty" in out


def test_neither_file_nor_category() -> None:
    code, out = invoke("certification", "run")
    assert code == 1
    assert "either --cert-file or at least one --category is required" in out


def test_an_unknown_category_lists_the_catalog() -> None:
    code, out = invoke("certification", "run", "--category", "a/b")
    assert code == 1
    assert out.startswith('Error: unknown category "a/b"\n\nAvailable categories:\n')
    assert "\n  communication/nccl-all-reduce\n" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--timeout", "5m"], "--timeout is only valid with --wait"),
        (["--wait", "--timeout", "0s"], 'invalid --timeout "0s": must be at least 1s'),
        (["--wait", "--timeout", "-1m"], 'invalid --timeout "-1m": must be at least 1s'),
        (["--wait", "--timeout", "500ms"], 'invalid --timeout "500ms": must be at least 1s'),
        (["--wait", "--timeout", "soon"], 'invalid --timeout "soon"'),
        (["--results-file", "out.json"], "--results-file, --junit-file and --html-file need --wait"),
        (["--html-file", "out.html"], "--results-file, --junit-file and --html-file need --wait"),
        (["--cleanup"], "--cleanup needs --wait"),
    ],
)
def test_timeout_and_results_need_wait(flags: list[str], message: str) -> None:
    code, out = invoke("workloadrun", "run", str(EXAMPLES / "workloadrun" / "basic.yaml"), *flags)
    assert code == 1
    assert message in out


def test_the_manifest_is_validated_like_render(tmp_path: Path) -> None:
    document = yaml.safe_load((EXAMPLES / "workloadrun" / "basic.yaml").read_text())
    document["spec"]["numNodes"] = 0
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document))
    code, out = invoke("workloadrun", "run", str(path))
    assert code == 1 and "spec.numNodes" in out
    code, out = invoke("workloadrun", "run", str(EXAMPLES / "certification" / "gpu-cluster-cert.yaml"))
    assert (code, out.strip()) == (
        1,
        f'Error: {EXAMPLES}/certification/gpu-cluster-cert.yaml: expected kind WorkloadRun, got "Certification"',
    )


def test_an_unknown_category_in_the_file_is_refused_offline(tmp_path: Path) -> None:
    document = json.loads(json.dumps(CERT))
    document["spec"]["categories"] = [{"domain": "communication", "variant": "nccl-nope"}]
    path = tmp_path / "cert.yaml"
    path.write_text(yaml.safe_dump(document))
    code, out = invoke("certification", "run", str(path))
    assert code == 1 and 'unknown category "communication/nccl-nope"' in out


def test_password_from_stdin_and_in_the_secret_only() -> None:
    registry = run_execution.registry_from_flags(
        "nvcr.io", "$oauthtoken", "", True, lambda: "k3y-from-stdin\n"
    )
    assert registry is not None
    assert "k3y-from-stdin" not in repr(registry)
    config = json.loads(registry.docker_config())
    entry = config["auths"]["nvcr.io"]
    assert (entry["username"], entry["password"]) == ("$oauthtoken", "k3y-from-stdin")
    assert base64.b64decode(entry["auth"]).decode() == "$oauthtoken:k3y-from-stdin"
    assert registry.scrub("refused: k3y-from-stdin") == "refused: ***"
    with pytest.raises(run_execution.UserError, match="mutually exclusive"):
        run_execution.registry_from_flags("nvcr.io", "u", "p", True, lambda: "x")
    with pytest.raises(run_execution.UserError, match="no password on stdin"):
        run_execution.registry_from_flags("nvcr.io", "u", "", True, lambda: "\n")


def test_derived_timeout_of_a_certification() -> None:
    from nvcre.cli.run_commands import derived_timeout

    cert = json.loads(json.dumps(CERT))
    assert derived_timeout(cert) == 1.5 * 3600  # the catalog's 1h per job
    cert["spec"]["timeoutPerJob"] = "10m"
    assert derived_timeout(cert) == 30 * 60  # floored at 30 minutes
    cert["spec"]["timeoutPerJob"] = "1h"
    cert["spec"]["categories"][0]["options"] = {"repeatCount": 2}
    assert derived_timeout(cert) == 3 * 3600
