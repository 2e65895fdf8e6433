"""Name truncation and hashing.

Expected values come from the published FNV-1a test vectors and from Go's ``hash/fnv`` with
``fmt.Sprintf("%05x", h)[:5]`` and ``strings.TrimRight(name[:n], "-")``, i.e. computed
independently of the code under test.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvcre import naming
from nvcre.naming import (
    MAX_JOB_NAME_LEN,
    MAX_K8S_NAME_LEN,
    MAX_WORKFLOW_NAME_LEN,
    MAX_WORKLOAD_NAME_LEN,
    extract_hash,
    fnv1a32,
    short_hash,
    truncate,
)


def test_limits() -> None:
    limits = (MAX_K8S_NAME_LEN, MAX_WORKLOAD_NAME_LEN, MAX_JOB_NAME_LEN, MAX_WORKFLOW_NAME_LEN)
    assert limits == (63, 44, 35, 31)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0x811C9DC5),
        ("a", 0xE40C292C),
        ("foobar", 0xBF9CF968),
        ("padding-check-workflow-name-number-1931", 0xEABC2),
        ("padding-check-workflow-name-number-41110", 0x9EAB),
    ],
)
def test_fnv1a32_vectors(text: str, expected: int) -> None:
    assert fnv1a32(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "811c9"),
        ("a", "e40c2"),
        ("foobar", "bf9cf"),
        ("hello", "4f9f2"),
        ("my-workflow", "530b9"),
        # hash < 0x100000 prints as exactly 5 digits
        ("padding-check-workflow-name-number-1931", "eabc2"),
        # hash < 0x10000 is zero-padded to 5 digits
        ("padding-check-workflow-name-number-41110", "09eab"),
    ],
)
def test_short_hash_takes_first_five_hex_digits(text: str, expected: str) -> None:
    assert short_hash(text) == expected


@pytest.mark.parametrize(
    ("name", "max_len", "expected"),
    [
        # the spec's worked example (46 chars -> 25-char prefix + hash = 31)
        ("gpu-cluster-cert-communication-nccl-all-reduce", 31, "gpu-cluster-cert-communic-8b97e"),
        (
            "gpu-cluster-cert-communication-nccl-all-reduce-group-0-iter-1",
            35,
            "gpu-cluster-cert-communicatio-40f04",
        ),
        ("gpu-cluster-cert-communication-nccl-all-reduce-job", 35, "gpu-cluster-cert-communicatio-573b3"),
        (
            "my-very-long-job-name-that-goes-on-group-0-iter-1-workload",
            44,
            "my-very-long-job-name-that-goes-on-gro-58199",
        ),
        (
            "x-y-z-long-name-for-goodput-measurement-of-a-job-with-a-long-name-goodput",
            63,
            "x-y-z-long-name-for-goodput-measurement-of-a-job-with-a-l-2a5a1",
        ),
        ("padding-check-workflow-name-number-41110", 31, "padding-check-workflow-na-09eab"),
        # exact boundaries of every limit: len == limit unchanged, limit + 1 truncated
        ("a" * 31, 31, "a" * 31),
        ("a" * 32, 31, "a" * 25 + "-4d504"),
        ("b" * 35, 35, "b" * 35),
        ("b" * 36, 35, "b" * 29 + "-ecc02"),
        ("c" * 44, 44, "c" * 44),
        ("c" * 45, 44, "c" * 38 + "-6b4fe"),
        ("d" * 63, 63, "d" * 63),
        ("d" * 64, 63, "d" * 57 + "-dc08f"),
        # trailing dashes of the kept prefix are stripped (all of them)
        ("a" * 17 + "--" + "b" * 20, 25, "a" * 17 + "-a212b"),
        ("gpu-cluster-cert-communi--nccl-all-reduce", 31, "gpu-cluster-cert-communi-f5e6b"),
        ("-" * 39, 31, "-dad9b"),
        # tiny limits keep max(max_len - 6, 1) == 1 character
        ("abcdefgh", 3, "a-76daa"),
        ("a-bcdefgh", 3, "a-c25fc"),
        ("abcdefghijklmn-o", 10, "abcd-f82f7"),
    ],
)
def test_truncate_vectors(name: str, max_len: int, expected: str) -> None:
    assert truncate(name, max_len) == expected


@pytest.mark.parametrize(
    "limit", [MAX_K8S_NAME_LEN, MAX_WORKLOAD_NAME_LEN, MAX_JOB_NAME_LEN, MAX_WORKFLOW_NAME_LEN]
)
def test_truncate_boundary_per_limit(limit: int) -> None:
    fits = "x" * limit
    over = "x" * (limit + 1)
    assert truncate(fits, limit) == fits
    out = truncate(over, limit)
    assert out != over
    assert len(out) == limit
    assert out == "x" * (limit - 6) + "-" + short_hash(over)


name_chars = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=0, max_size=120)


@given(name=name_chars, max_len=st.integers(min_value=7, max_value=80))
def test_truncate_properties(name: str, max_len: int) -> None:
    out = truncate(name, max_len)
    assert out == truncate(name, max_len)  # deterministic
    if len(name) <= max_len:
        assert out == name
    else:
        assert len(out) <= max_len
        prefix, _, suffix = out.rpartition("-")
        assert suffix == short_hash(name)
        assert name.startswith(prefix)
        assert not prefix.endswith("-")
        assert extract_hash(out) == suffix


@given(name=name_chars)
def test_short_hash_shape(name: str) -> None:
    h = short_hash(name)
    assert re.fullmatch(r"[0-9a-f]{5}", h)
    assert h == hex(fnv1a32(name))[2:].rjust(5, "0")[:5]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpu-cluster-cert-communic-8b97e", "8b97e"),  # truncated name: its suffix
        ("my-workflow", "530b9"),  # last segment 8 chars: hash of the whole name
        ("abcde", "749bc"),  # no dash: hash of the whole name
        ("wf-train", "train"),  # reference quirk: any 5-char last segment is "extracted"
        ("wf-", short_hash("wf-")),
        ("", "811c9"),
    ],
)
def test_extract_hash(name: str, expected: str) -> None:
    assert extract_hash(name) == expected


# --- child names -------------------------------------------------------------------------------


def test_certification_workflow_name() -> None:
    assert naming.certification_workflow_name("cert", "comm", "nccl") == "cert-comm-nccl"
    long = naming.certification_workflow_name("gpu-cluster-cert", "communication", "nccl-all-reduce")
    assert long == "gpu-cluster-cert-communic-8b97e"
    assert len(long) == MAX_WORKFLOW_NAME_LEN
    with_opts = naming.certification_workflow_name("c", "d", "v", "-n2-mnnvl")
    assert with_opts == "c-d-v-n2-mnnvl"


def test_category_options_suffix_order() -> None:
    assert naming.category_options_suffix() == ""
    suffix = naming.category_options_suffix(
        gpus_per_node=4,
        exit_duration_mins=10,
        max_steps=20,
        enable_checkpoint=True,
        test_scale="intra-node",
        enable_mnnvl=False,
        nodes_per_job=2,
    )
    assert suffix == "-n2-nomnnvl-intra-node-ckpt-s20-e10-g4"
    assert naming.category_options_suffix(enable_mnnvl=True, enable_checkpoint=False) == "-mnnvl"
    assert naming.category_options_suffix(max_steps=-1) == "-s-1"


def test_workload_run_workflow_name_is_identity() -> None:
    assert naming.workload_run_workflow_name("a" * 100) == "a" * 100


@pytest.mark.parametrize(
    ("groups", "iterations", "diagnose", "expected"),
    [
        (1, 1, False, True),
        (0, 0, False, True),
        (2, 1, False, False),
        (1, 2, False, False),
        (1, 1, True, False),
    ],
)
def test_uses_single_job_name(groups: int, iterations: int, diagnose: bool, expected: bool) -> None:
    assert naming.uses_single_job_name(groups, iterations, diagnose=diagnose) is expected


def test_job_name() -> None:
    assert naming.job_name("wf", "group-0", 1, single=True) == "wf-job"
    assert naming.job_name("wf", "group-1-overflow", 3, single=False) == "wf-group-1-overflow-iter-3"
    wf = "gpu-cluster-cert-communication-nccl-all-reduce"
    assert naming.job_name(wf, "group-0", 1, single=False) == "gpu-cluster-cert-communicatio-40f04"
    assert naming.job_name(wf, "group-0", 1, single=True) == "gpu-cluster-cert-communicatio-573b3"


def test_workload_and_measurement_names() -> None:
    assert naming.trainjob_name("wf-job") == "wf-job-workload"
    job = "gpu-cluster-cert-communicatio-40f04"  # a 35-char Job name
    assert naming.trainjob_name(job) == job + "-workload"
    assert len(naming.trainjob_name(job)) == MAX_WORKLOAD_NAME_LEN
    assert naming.trainjob_name("my-very-long-job-name-that-goes-on-group-0-iter-1") == (
        "my-very-long-job-name-that-goes-on-gro-58199"
    )
    assert naming.goodput_measurement_name("wf-job") == "wf-job-goodput"
    assert naming.bandwidth_measurement_name("wf-job") == "wf-job-bandwidth"
    long_job_name = "x-y-z-long-name-for-goodput-measurement-of-a-job-with-a-long-name"
    expected = "x-y-z-long-name-for-goodput-measurement-of-a-job-with-a-l-2a5a1"
    assert naming.goodput_measurement_name(long_job_name) == expected
    long_job = "j" * 60
    assert len(naming.bandwidth_measurement_name(long_job)) == MAX_K8S_NAME_LEN


def test_dependency_copy_names() -> None:
    assert naming.dependency_copy_suffix("my-workflow", "group-0", 1, single=True) == "-530b9-job"
    assert naming.dependency_copy_suffix("gpu-cluster-cert-communic-8b97e", "group-2", 4, single=False) == (
        "-8b97e-group-2-iter-4"
    )
    assert naming.dependency_copy_name("nccl-runtime", "my-workflow", "group-0", 1, single=True) == (
        "nccl-runtime-530b9-job"
    )
    long_dep = "nccl-runtime-abcde-group-10-iter-3-and-some-more-padding-to-exceed-sixty-three"
    assert naming.truncate(long_dep, 63) == "nccl-runtime-abcde-group-10-iter-3-and-some-more-padding-39323"
    copy = naming.dependency_copy_name("r" * 60, "my-workflow", "group-0", 1, single=True)
    assert len(copy) == MAX_K8S_NAME_LEN
    assert copy == truncate("r" * 60 + "-530b9-job", 63)


def test_workload_run_child_names() -> None:
    assert naming.runtime_name("run") == "run-runtime"
    assert naming.config_map_name("run") == "run-config"
    assert naming.checkpoint_pvc_name("run") == "run-checkpoint-pvc"


def test_node_result_config_map_names() -> None:
    uid = "0f9e8d7c-1234-5678-9abc-def012345678"
    assert naming.succeeded_nodes_config_map_name(uid) == "succeeded-nodes-0f9e8d7c"
    assert naming.failed_nodes_config_map_name(uid) == "failed-nodes-0f9e8d7c"
    with pytest.raises(ValueError):
        naming.failed_nodes_config_map_name("")
