"""gpu-defaults: the table, platform overrides (explicit 0 counts), explicit values, fallback warning."""

from __future__ import annotations

import pytest

from nvcre.api.v1alpha1.constants import EventReason, EventType
from nvcre.platform import GPU_ARCHITECTURES, gpu_defaults, resolve_gpu_defaults
from nvcre.platform.gpu_defaults import GPUDefaultsDataError, known_architectures, parse_table


@pytest.mark.parametrize(
    ("arch", "gpus", "mlnx", "mnnvl"),
    [
        ("h100", 8, 8, False),
        ("h200", 8, 8, False),
        ("a100", 8, 8, False),
        ("l40s", 8, 8, False),
        ("l40", 8, 4, False),
        ("b200", 8, 8, False),
        ("b300", 8, 8, False),
        ("gb200", 4, 8, True),
        ("gb300", 4, 8, True),
        ("rtxpro6000", 8, 0, False),
    ],
)
def test_architecture_defaults(arch: str, gpus: int, mlnx: int, mnnvl: bool) -> None:
    defaults = gpu_defaults(arch)
    assert (defaults.gpus_per_node, defaults.mlnx_per_node, defaults.enable_mnnvl) == (gpus, mlnx, mnnvl)
    assert defaults.fallback_fields == ()
    assert defaults.events == ()
    assert defaults.message == ""


@pytest.mark.parametrize(
    ("arch", "gpus", "mlnx"),
    [("l40s", 4, 2), ("gb200", 4, 0), ("gb300", 4, 4), ("h100", 8, 8)],
)
def test_oci_platform_overrides(arch: str, gpus: int, mlnx: int) -> None:
    defaults = gpu_defaults(arch, "oci")
    assert (defaults.gpus_per_node, defaults.mlnx_per_node) == (gpus, mlnx)


def test_other_platforms_use_arch_defaults() -> None:
    assert gpu_defaults("gb200", "aws").mlnx_per_node == 8
    assert gpu_defaults("l40s", "azure").gpus_per_node == 8


def test_explicit_values_win_over_platform_override() -> None:
    defaults = resolve_gpu_defaults("gb200", "oci", mlnx_per_node=2, gpus_per_node=2, enable_mnnvl=False)
    assert (defaults.gpus_per_node, defaults.mlnx_per_node, defaults.enable_mnnvl) == (2, 2, False)


def test_explicit_zero_counts() -> None:
    assert resolve_gpu_defaults("h100", mlnx_per_node=0).mlnx_per_node == 0


def test_unknown_architecture_falls_back_with_warning() -> None:
    defaults = gpu_defaults("tesla")
    assert (defaults.gpus_per_node, defaults.mlnx_per_node, defaults.enable_mnnvl) == (4, 0, False)
    assert defaults.fallback_fields == ("gpusPerNode", "mlnxPerNode", "enableMNNVL")
    assert defaults.message == (
        'GPU architecture "tesla" has no gpu-defaults entry; using fallback defaults '
        "gpusPerNode=4, mlnxPerNode=0, enableMNNVL=false"
    )
    (event,) = defaults.events
    assert (event.type, event.reason) == (EventType.WARNING, EventReason.GPU_ARCHITECTURE_DEFAULTS)


def test_undetected_architecture_message() -> None:
    defaults = gpu_defaults("unknown")
    assert defaults.message.startswith(
        "GPU architecture is unknown (no target node has the nvidia.com/gpu.product label)"
    )


def test_fallback_warning_names_only_fields_it_supplied() -> None:
    defaults = resolve_gpu_defaults("tesla", gpus_per_node=2)
    assert defaults.fallback_fields == ("mlnxPerNode", "enableMNNVL")
    assert "gpusPerNode" not in defaults.message
    assert resolve_gpu_defaults("tesla", gpus_per_node=2, mlnx_per_node=0, enable_mnnvl=True).events == ()


def test_table_and_known_architectures_agree() -> None:
    assert known_architectures() == GPU_ARCHITECTURES


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[", "not valid YAML"),
        ("{}", "architectures must be a mapping"),
        (
            "architectures: {h100: {gpusPerNode: 8}}\nfallback: {gpusPerNode: 4, mlnxPerNode: 0, enableMNNVL: false}",
            "missing",
        ),
        ("architectures: {h100: {gpusPerNode: -1, mlnxPerNode: 0, enableMNNVL: false}}", "gpusPerNode"),
        (
            "architectures: {h100: {gpusPerNode: 8, mlnxPerNode: 0, enableMNNVL: false, x: 1}}",
            "unknown field",
        ),
        (
            "architectures: {}\nfallback: {gpusPerNode: 4, mlnxPerNode: 0, enableMNNVL: false}\n"
            "platformOverrides: {oci: {l40s: {gpusPerNode: '4'}}}",
            "platformOverrides.oci.l40s.gpusPerNode",
        ),
    ],
)
def test_malformed_table_fails_fast(text: str, message: str) -> None:
    with pytest.raises(GPUDefaultsDataError, match=message.replace(".", r"\.")):
        parse_table(text)
