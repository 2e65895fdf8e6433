"""nvcre-manager's user errors: one clear line on stderr, exit 1, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig

from nvcre.manager.main import build, main, parse_args

EMPTY_KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"
TOKEN_KUBECONFIG = {
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "c",
}
NO_PROBES = ["--metrics-bind-address=0", "--health-probe-bind-address=0"]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main([*argv, *NO_PROBES])
    return int(exited.value.code or 0), capsys.readouterr().err


def test_missing_kubeconfig_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.kubeconfig"
    code, err = run_main([f"--kubeconfig={missing}"], capsys)
    assert code == 1
    assert (
        err.strip() == f"nvcre-manager: error: kubeconfig {missing}: Configuration file {missing} not found"
    )


def test_unknown_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(EMPTY_KUBECONFIG)
    code, err = run_main([f"--kubeconfig={config}", "--context=staging"], capsys)
    assert (code, err.strip()) == (
        1,
        f"nvcre-manager: error: kubeconfig {config}: Context 'staging' not found",
    )


def test_malformed_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("clusters: [\n")
    code, err = run_main([f"--kubeconfig={config}"], capsys)
    assert code == 1
    assert err.startswith(f"nvcre-manager: error: kubeconfig {config} is not valid YAML")
    assert len(err.strip().splitlines()) == 1


def test_kubeconfig_naming_missing_certificate_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        f"users: [{{name: u, user: {{client-certificate: {tmp_path}/u.crt, client-key: {tmp_path}/u.key}}}}]\n"
    )
    code, err = run_main([f"--kubeconfig={config}"], capsys)
    assert code == 1
    assert err.startswith(f"nvcre-manager: error: kubeconfig {config} is not usable: FileNotFoundError")
    assert len(err.strip().splitlines()) == 1


def test_the_installed_process_prints_no_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config either
    done = subprocess.run(
        [sys.executable, "-m", "nvcre.manager", *NO_PROBES],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "nvcre-manager: error: kubeconfig the in-cluster config or $KUBECONFIG: "
        "Configuration file ~/.kube/config not found"
    ]


def test_flag_errors_exit_2_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--max-concurrent-reconciles=0"])
    assert exited.value.code == 2
    assert "--max-concurrent-reconciles must be greater than 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "timing",
    [
        ["--lease-duration=10", "--renew-deadline=10"],
        ["--renew-deadline=1", "--retry-period=2"],
        ["--retry-period=0", "--renew-deadline=1", "--lease-duration=2"],
    ],
)
def test_leader_election_timings_must_nest(timing: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(timing)
    assert exited.value.code == 2
    assert "needs --lease-duration > --renew-deadline > --retry-period > 0" in capsys.readouterr().err


def test_manager_registers_every_controller_with_its_workers() -> None:
    """The measurement controllers run, sized by their own flag (the reference's), the others by
    ``--max-concurrent-reconciles``; the retention pass is one worker. (Report exports are
    delivered off these workers, see ``controllers.reportexport``.)"""
    client = AsyncClient(config=KubeConfig.from_dict(TOKEN_KUBECONFIG))
    args = parse_args(["--max-concurrent-reconciles=7", "--measurement-max-concurrent-reconciles=3"])
    manager = build(args, client)
    assert [(c.name, c.workers) for c in manager.controllers] == [
        ("workflow", 7),
        ("job", 7),
        ("bandwidthmeasurement", 3),
        ("goodputmeasurement", 3),
        ("workloadrun", 7),
        ("certification", 7),
        ("noderecord", 7),
        ("noderecord-retention", 1),
        ("reportexportpolicy", 7),
        ("reportexport", 7),
    ]
    assert parse_args([]).measurement_max_concurrent_reconciles == 5


def test_measurement_workers_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--measurement-max-concurrent-reconciles=0"])
    assert exited.value.code == 2
    assert "--measurement-max-concurrent-reconciles must be greater than 0, got 0" in capsys.readouterr().err


def test_release_timeout_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args([]).release_timeout == 600
    with pytest.raises(SystemExit) as exited:
        main(["--release-timeout=0"])
    assert exited.value.code == 2
    assert "--release-timeout must be positive, got 0" in capsys.readouterr().err


def test_a_cluster_id_is_optional_and_at_most_253_characters(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args([]).cluster_id is None
    assert parse_args(["--cluster-id=lab-east"]).cluster_id == "lab-east"
    with pytest.raises(SystemExit) as exited:
        main(["--cluster-id=" + "x" * 254])
    assert exited.value.code == 2
    assert "--cluster-id must have 1 to 253 characters, got 254" in capsys.readouterr().err
