"""Every ``run`` flag of cli.md 4.2 and 5.1 on the object the command would create, and the
kubectl connection flags on the connection it would open (no cluster is contacted here; the
integration tests create the objects and connect for real)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvcre.cli import connection, run_commands, run_execution
from nvcre.cli.common import UserError
from nvcre.cli.connection import Overrides, single_config
from nvcre.cli.main import cli
from nvcre.platform import synthetic_nodes
from nvcre.testing.builders import Certification
from tests.unit.cli_invoke import invoke, write_yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASIC = EXAMPLES / "workloadrun" / "basic.yaml"
CERT = (
    Certification("c1")
    .target({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}})
    .spec(enableMNNVL=True)
    .obj()
)
AWS_KEY = "topology.k8s.aws/network-node-layer-1"


@pytest.fixture
def requested(monkeypatch: pytest.MonkeyPatch) -> list[run_execution.RunRequest]:
    """What the run commands would create, were they to connect (no kubeconfig here)."""
    requests: list[run_execution.RunRequest] = []
    monkeypatch.setattr(run_execution, "execute", lambda kube, request: requests.append(request))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    return requests


@pytest.fixture
def created(
    monkeypatch: pytest.MonkeyPatch, requested: list[run_execution.RunRequest]
) -> list[run_execution.RunRequest]:
    """What the run commands would create (the connection is never used)."""
    monkeypatch.setattr(connection, "client", lambda *args, **kwargs: object())
    return requested


@pytest.fixture
def cert_file(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "cert.yaml", CERT)


def spec_of(created: list[run_execution.RunRequest]) -> dict[str, Any]:
    (request,) = created
    spec: dict[str, Any] = request.document["spec"]
    return spec


# --- certification run ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "fields"),
    [
        (["--enable-checkpoint"], {"enableCheckpoint": True}),
        (["--no-enable-checkpoint"], {"enableCheckpoint": False}),
        (["--no-enable-mnnvl"], {"enableMNNVL": False}),
        (["--max-steps", "100"], {"maxSteps": 100}),
        (["--max-steps", "-1", "--exit-duration-mins", "30"], {"maxSteps": -1, "exitDurationMins": 30}),
        (["--max-restarts", "3"], {"maxRestarts": 3}),
        (["--storage-class", "fast.ssd-1"], {"storageClassName": "fast.ssd-1"}),
        (
            ["--nodes-per-job", "2", "--gpus-per-node", "4", "--repeat-count", "3"],
            {"nodesPerJob": 2, "gpusPerNode": 4, "repeatCount": 3},
        ),
    ],
)
def test_each_certification_flag_sets_its_spec_field(
    cert_file: Path, created: list[run_execution.RunRequest], flags: list[str], fields: dict[str, Any]
) -> None:
    code, out = invoke("certification", "run", str(cert_file), *flags)
    assert code == 0, out
    spec = spec_of(created)
    assert {key: spec[key] for key in fields} == fields
    untouched = {"enableMNNVL": True} if "enableMNNVL" not in fields else {}
    assert {key: spec[key] for key in untouched} == untouched  # the file's value stays


def test_flags_not_given_leave_the_files_spec(
    cert_file: Path, created: list[run_execution.RunRequest]
) -> None:
    code, out = invoke("certification", "run", str(cert_file), "--max-steps", "0", "--max-restarts", "0")
    assert code == 0, out
    assert spec_of(created) == CERT["spec"]


def test_the_flags_build_the_spec_of_a_category_certification() -> None:
    flags = run_commands.CategoryFlags(max_steps=50, storage_class="local", enable_mnnvl=True)
    cert = run_commands.category_certification(
        [("communication", "nccl-all-reduce")], "c", "ns", "NVIDIA-GB200", flags.spec()
    )
    assert cert["spec"] == {
        "target": {
            "nodeSelector": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-GB200"}
        },
        "categories": [{"domain": "communication", "variant": "nccl-all-reduce"}],
        "maxSteps": 50,
        "storageClassName": "local",
        "enableMNNVL": True,
    }


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--storage-class", "Fast_SSD"], 'invalid --storage-class "Fast_SSD": a StorageClass name is'),
        (["--max-steps", "-2"], "Invalid value for '--max-steps': -2 is not in the range x>=-1."),
        (["--max-restarts", "-1"], "Invalid value for '--max-restarts': -1 is not in the range x>=0."),
    ],
)
def test_a_bad_certification_flag_is_refused_offline(
    cert_file: Path, created: list[run_execution.RunRequest], flags: list[str], message: str
) -> None:
    code, out = invoke("certification", "run", str(cert_file), *flags)
    assert code != 0 and not created
    assert message in out


# --- workloadrun run --------------------------------------------------------------------------------


def test_node_list_sets_the_names_and_lowers_num_nodes_only(created: list[run_execution.RunRequest]) -> None:
    file_nodes = yaml.safe_load(BASIC.read_text())["spec"]["numNodes"]
    assert file_nodes == 4
    five = ",".join(f"gpu-{i}" for i in range(5))
    assert invoke("workloadrun", "run", str(BASIC), "--node-list", "gpu-a, gpu-b")[0] == 0
    assert invoke("workloadrun", "run", str(BASIC), "--node-list", five)[0] == 0
    two, more = created
    assert two.document["spec"]["target"] == {"nodeNames": ["gpu-a", "gpu-b"]}
    assert two.document["spec"]["numNodes"] == 2
    assert more.document["spec"]["target"]["nodeNames"] == five.split(",")
    assert more.document["spec"]["numNodes"] == 4  # never raised


def test_test_scale_sets_the_orchestration(created: list[run_execution.RunRequest]) -> None:
    code, out = invoke("workloadrun", "run", str(BASIC), "--test-scale", "intra-rack")
    assert code == 0, out
    assert spec_of(created)["orchestration"]["testScale"] == "intra-rack"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--node-list", "a,,b"], 'invalid --node-list "a,,b": an empty node name'),
        (["--node-list", "a,b,a"], 'invalid --node-list "a,b,a": a node named twice'),
        (["--test-scale", "huge"], "Invalid value for '--test-scale': 'huge' is not one of"),
        (["--topology-key", AWS_KEY], "--topology-key needs --topology-domain"),
    ],
)
def test_a_bad_workloadrun_flag_is_refused_offline(
    created: list[run_execution.RunRequest], flags: list[str], message: str
) -> None:
    code, out = invoke("workloadrun", "run", str(BASIC), *flags)
    assert code != 0 and not created
    assert message in out


def nodes(platform: str, rack: str, count: int, prefix: str, key: str = AWS_KEY) -> list[dict[str, Any]]:
    return synthetic_nodes(platform, "h100", count=count, labels={key: rack}, name_prefix=prefix)


def workloadrun(target: dict[str, Any] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(BASIC.read_text())
    if target is not None:
        document["spec"]["target"] = target
    return document


def test_topology_domain_narrows_the_target_to_the_domain_and_counts_its_nodes() -> None:
    cluster = nodes("aws", "rack-a", 3, "a") + nodes("aws", "rack-b", 2, "b")
    document = workloadrun()
    run_commands.apply_topology(document, cluster, "rack-a", "")
    assert document["spec"]["target"]["matchExpressions"] == [
        {"key": AWS_KEY, "operator": "In", "values": ["rack-a"]}
    ]
    assert document["spec"]["numNodes"] == 3
    custom = nodes("onprem", "row-1", 2, "c", key="example.com/row") + nodes("onprem", "row-2", 1, "d")
    document = workloadrun()
    run_commands.apply_topology(document, custom, "row-1", "example.com/row")
    assert document["spec"]["numNodes"] == 2


def test_topology_domain_without_key_needs_a_cloud_and_a_matching_node() -> None:
    with pytest.raises(UserError, match='--topology-domain requires --topology-key on platform "onprem"'):
        run_commands.apply_topology(workloadrun(), nodes("onprem", "r", 2, "a"), "r", "")
    with pytest.raises(UserError) as raised:
        run_commands.apply_topology(workloadrun(), nodes("aws", "rack-a", 2, "a"), "rack-z", "")
    assert str(raised.value) == (
        f'--topology-domain "rack-z": no schedulable GPU node of the target has {AWS_KEY}=rack-z'
    )


# --- connection flags -------------------------------------------------------------------------------


def kubeconfig(tmp_path: Path, namespace: str | None = None) -> Path:
    context: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority-data": "Zm9v"},
            },
            {"name": "other", "cluster": {"server": "https://10.0.0.2:6443"}},
        ],
        "users": [
            {"name": "u", "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}},
            {"name": "v", "user": {"token": "from-the-file"}},
        ],
        "contexts": [{"name": "ctx", "context": context}],
        "current-context": "ctx",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_overrides_change_the_context_as_kubectls_do(tmp_path: Path) -> None:
    path = str(kubeconfig(tmp_path))
    plain = single_config(path, None, Overrides())
    assert (plain.cluster.server, plain.cluster.certificate_auth_data) == ("https://10.0.0.1:6443", "Zm9v")
    ca = tmp_path / "ca.crt"
    changed = single_config(
        path, None, Overrides(server="https://api.example:443", certificate_authority=str(ca), token="t0k")
    )
    assert changed.cluster.server == "https://api.example:443"
    assert (changed.cluster.certificate_auth, changed.cluster.certificate_auth_data) == (str(ca), None)
    assert changed.user is not None
    assert (changed.user.token, changed.user.client_cert_data) == ("t0k", None)  # the token replaces them
    assert "t0k" not in repr(Overrides(token="t0k"))
    insecure = single_config(path, None, Overrides(insecure_skip_tls_verify=True))
    assert (insecure.cluster.insecure, insecure.cluster.certificate_auth_data) == (True, None)
    picked = single_config(path, None, Overrides(cluster="other", user="v"))
    assert picked.cluster.server == "https://10.0.0.2:6443"
    assert picked.user is not None and picked.user.token == "from-the-file"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (Overrides(cluster="nope"), '--cluster "nope": no such cluster in the kubeconfig'),
        (Overrides(user="nope"), '--user "nope": no such user in the kubeconfig'),
        (
            Overrides(certificate_authority="ca.crt", insecure_skip_tls_verify=True),
            "--certificate-authority and --insecure-skip-tls-verify are mutually exclusive",
        ),
    ],
)
def test_an_override_that_cannot_apply_is_an_error(tmp_path: Path, flags: Overrides, message: str) -> None:
    with pytest.raises(UserError) as raised:
        single_config(str(kubeconfig(tmp_path)), None, flags)
    assert str(raised.value) == message


def test_server_and_token_need_no_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    config = single_config(None, None, Overrides(server="https://api.example:443", token="t0k"))
    assert config.cluster.server == "https://api.example:443"
    assert config.user is not None and config.user.token == "t0k"


@pytest.mark.parametrize(
    ("text", "seconds"), [(None, 10.0), ("0", None), ("30", 30.0), ("1m30s", 90.0), ("500ms", 0.5)]
)
def test_request_timeout(text: str | None, seconds: float | None) -> None:
    assert Overrides(request_timeout=text).timeout_seconds() == seconds


def test_a_bad_request_timeout_names_the_flag() -> None:
    with pytest.raises(UserError, match='invalid --request-timeout "soon": give whole seconds'):
        Overrides(request_timeout="soon").timeout_seconds()


def test_impersonation_headers() -> None:
    flags = Overrides(impersonate="jane", impersonate_groups=("dev", "ops"), impersonate_uid="42")
    assert flags.headers() == [
        ("Impersonate-User", "jane"),
        ("Impersonate-Group", "dev"),
        ("Impersonate-Group", "ops"),
        ("Impersonate-Uid", "42"),
    ]
    with pytest.raises(UserError, match="--as-group and --as-uid need --as"):
        Overrides(impersonate_groups=("dev",)).headers()


def test_the_namespace_defaults_to_the_contexts(
    tmp_path: Path, created: list[run_execution.RunRequest], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path, namespace="team-a")))
    cert = tmp_path / "cert.yaml"
    cert.write_text(json.dumps(CERT))
    assert invoke("workloadrun", "run", str(BASIC))[0] == 0
    assert invoke("workloadrun", "run", str(BASIC), "-n", "mine")[0] == 0
    assert invoke("certification", "run", str(cert))[0] == 0
    assert [r.document["metadata"]["namespace"] for r in created] == ["team-a", "mine", "team-a"]
    assert connection.resolve_namespace(None, None, None) == "team-a"
    (tmp_path / "plain").mkdir()
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "plain")))
    assert connection.resolve_namespace(None, None, None) == "default"


# --- --setup ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--image", "registry.example/nvcre:1"], "--image and --controller-pull-secret need --setup"),
        (["--controller-pull-secret", "ghp_x"], "--image and --controller-pull-secret need --setup"),
        (
            ["--setup", "--user", "u", "--as-uid", "7"],
            "helm takes no --user, --as-uid: set them in the kubeconfig",
        ),
        (["--setup", "--cleanup"], "--cleanup needs --wait"),
    ],
)
@pytest.mark.parametrize("command", ["workloadrun", "certification"])
def test_setup_flags_are_checked_before_anything_is_installed(
    cert_file: Path, created: list[run_execution.RunRequest], command: str, flags: list[str], message: str
) -> None:
    file = str(BASIC if command == "workloadrun" else cert_file)
    code, out = invoke(command, "run", file, *flags)
    assert code == 1 and not created
    assert message in out
    assert "[setup]" not in out


def test_setup_runs_setup_init_with_the_image_before_the_run(
    cert_file: Path, requested: list[run_execution.RunRequest]
) -> None:
    created = requested
    code, out = invoke("certification", "run", str(cert_file), "--setup", "--image", "Not An Image")
    assert (code, created) == (1, [])
    assert out == (
        "[setup] Installing dependencies...\n"
        'Error: invalid --image "Not An Image": expected REPOSITORY[:TAG][@sha256:DIGEST]\n'
    )
    missing = ["--kubeconfig", "/nonexistent/kubeconfig"]
    code, out = invoke(
        "workloadrun", "run", str(BASIC), "--setup", "--controller-pull-secret", "ghp_s3cret", *missing
    )
    assert (code, created) == (1, [])  # setup init connects first: no kubeconfig there
    assert out.startswith("[setup] Installing dependencies...\n[preflight] Checking prerequisites...\n")
    assert "Error: [preflight] cannot load kubeconfig" in out and "ghp_s3cret" not in out


def test_a_failed_setup_with_cleanup_is_reset(requested: list[run_execution.RunRequest]) -> None:
    created = requested
    code, out = invoke(
        "workloadrun",
        "run",
        str(BASIC),
        "--setup",
        "--cleanup",
        "--wait",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    )
    assert (code, created) == (1, [])
    lines = out.splitlines()
    assert lines[0] == "[setup] Installing dependencies..."
    assert [line.split(":")[0] for line in lines[1:]] == [
        "[preflight] Checking prerequisites...",  # setup init
        "Error",
        "[preflight] Checking prerequisites...",  # setup reset
        "Error",
        "Warning",
    ]
    assert lines[-1] == "Warning: setup reset failed (see above); nvcre stays installed"


def test_every_command_that_reaches_the_api_server_takes_the_connection_flags() -> None:
    import click

    def commands(group: click.Group, path: str) -> list[tuple[str, click.Command]]:
        found: list[tuple[str, click.Command]] = []
        ctx = click.Context(group)
        for name in group.list_commands(ctx):  # the groups load their commands lazily
            command = group.get_command(ctx, name)
            assert command is not None
            if isinstance(command, click.Group):
                found += commands(command, f"{path} {name}")
            else:
                found.append((f"{path} {name}".strip(), command))
        return found

    def flags(command: click.Command) -> set[str]:
        return {opt for param in command.params for opt in param.opts}

    connected = [
        (name, flags(command)) for name, command in commands(cli, "") if "--kubeconfig" in flags(command)
    ]
    overrides = {"--server", "--token", "--as", "--as-group", "--certificate-authority", "--request-timeout"}
    without = {name for name, given in connected if not overrides <= given}
    assert without == set()
    assert {
        "workloadrun run",
        "certification run",
        "fleet",
        "node history",
        "cluster info",
        "setup init",
    } <= {name for name, given in connected if overrides <= given}
