"""What the informer caches hold: trimmed objects, one shared informer per view, a counted cache."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lightkube.resources.core_v1 import ConfigMap, Node, Pod
from prometheus_client import REGISTRY

from nvcre.controllers import indexes
from nvcre.objects import Obj
from nvcre.runtime.leader import LeaderElectionConfig
from nvcre.runtime.manager import Manager
from nvcre.runtime.objects import compact, without_managed_fields

CLIENT: Any = None  # nothing here talks to an API server


def cached(kind: str) -> float:
    return REGISTRY.get_sample_value("nvcre_informer_cached_objects", {"kind": kind}) or 0.0


def config_map(name: str, version: str, **data: str) -> Obj:
    meta = {"name": name, "namespace": "ns", "resourceVersion": version}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def test_the_gauge_counts_what_the_cache_holds() -> None:
    informer = Manager(CLIENT).informer(ConfigMap, namespace="gauge")
    start = cached("ConfigMap")
    informer._apply("ADDED", config_map("a", "1"))
    informer._apply("ADDED", config_map("b", "2"))
    informer._apply("MODIFIED", config_map("a", "3", k="v"))
    assert cached("ConfigMap") == start + 2
    informer._apply("DELETED", config_map("a", "4"))
    informer._apply("DELETED", config_map("never-cached", "5"))
    assert cached("ConfigMap") == start + 1
    informer._replace([])  # a re-list that no longer has b
    assert cached("ConfigMap") == start
    assert informer.items() == []


def test_the_pod_cache_is_narrowed_to_workload_pods() -> None:
    manager = Manager(CLIENT)
    pods = indexes.pods(manager)
    assert pods.selector == "nvcre.nvidia.com/job"
    assert indexes.pods(manager) is pods, "one shared informer, however many controllers ask"
    assert manager.informer(Pod) is not pods, "an unfiltered view would be another cache"


def node_as_served() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n",
            "labels": {"nvidia.com/gpu.present": "true"},
            "managedFields": [{"manager": "kubelet", "operation": "Update"}],
        },
        "spec": {"providerID": "aws:///us-east-1a/i-0", "taints": []},
        "status": {
            "images": [{"names": ["nvcr.io/nvidia/pytorch:25.06-py3"], "sizeBytes": 9_000_000_000}],
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kernelVersion": "6.8.0"},
        },
    }


def test_cached_nodes_lose_images_and_managed_fields_and_keep_everything_else() -> None:
    manager = Manager(CLIENT)
    informer = indexes.nodes(manager)
    assert informer.transform is not None
    trimmed = informer.transform(node_as_served())
    expected = node_as_served()
    del expected["metadata"]["managedFields"], expected["status"]["images"]
    assert trimmed == expected


def test_every_cached_object_loses_its_managed_fields() -> None:
    informer = Manager(CLIENT).informer(ConfigMap)
    served = config_map("a", "1")
    served["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    assert informer.transform is not None
    assert informer.transform(served) == config_map("a", "1")
    assert without_managed_fields({"kind": "NoMetadata"}) == {"kind": "NoMetadata"}


def test_one_informer_has_one_transform_whoever_asks_first() -> None:
    manager = Manager(CLIENT)
    indexes.nodes(manager)
    with pytest.raises(ValueError, match=r"Node informer .* another transform"):
        manager.informer(Node)
    other = Manager(CLIENT)
    other.informer(Node)
    with pytest.raises(ValueError, match="another transform"):
        indexes.nodes(other)


def test_a_standby_is_ready_without_caches_and_a_leader_once_synced() -> None:
    standby = Manager(CLIENT, leader_election=LeaderElectionConfig("lease", "ns", "me"))
    standby.informer(ConfigMap)
    assert standby.ready(), "a standby caches nothing until it leads, so it has nothing to sync"
    single = Manager(CLIENT)
    informer = single.informer(ConfigMap)
    assert not single.ready()
    informer.synced.set()
    assert single.ready()


def served_json(name: str) -> Obj:
    """A node as a JSON decoder hands it over: a fresh string for every key and value."""
    node = node_as_served()
    node["metadata"]["name"] = name
    node["status"]["conditions"][0]["lastProbeTime"] = None
    node["status"]["nodeInfo"]["bootID"] = "x" * 200
    decoded: Obj = json.loads(json.dumps(node))
    return decoded


def test_compact_keeps_every_value_but_nulls_and_shares_repeated_strings() -> None:
    a, b = served_json("a"), served_json("b")
    ready_a, ready_b = a["status"]["conditions"][0], b["status"]["conditions"][0]
    assert ready_a["status"] is not ready_b["status"], "the decoder's own copies, before"
    small_a, small_b = compact(a), compact(b)
    expected = served_json("a")
    del expected["status"]["conditions"][0]["lastProbeTime"]
    assert small_a == expected, "equal but for the null, which a typed model omits too"
    cond_a, cond_b = small_a["status"]["conditions"][0], small_b["status"]["conditions"][0]
    assert cond_a["status"] is cond_b["status"] and cond_a["type"] is cond_b["type"]
    key_a = next(k for k in small_a["metadata"]["labels"])
    key_b = next(k for k in small_b["metadata"]["labels"])
    assert key_a is key_b, "label keys are shared too"
    long_a, long_b = small_a["status"]["nodeInfo"]["bootID"], small_b["status"]["nodeInfo"]["bootID"]
    assert long_a == long_b and long_a is not long_b, "long strings are left as they are"


def test_the_informer_caches_listed_items_compact_with_their_kind_and_trimmed() -> None:
    informer = indexes.nodes(Manager(CLIENT))
    listed = [served_json(name) for name in ("a", "b")]
    for item in listed:  # a list's items of a built-in kind carry no kind or apiVersion
        del item["kind"], item["apiVersion"]
    informer._replace([informer._plain(item) for item in listed])
    a, b = informer.get("", "a"), informer.get("", "b")
    assert a is not None and b is not None
    assert (a["apiVersion"], a["kind"]) == ("v1", "Node")
    assert "images" not in a["status"] and "managedFields" not in a["metadata"]
    assert a["status"]["conditions"][0]["type"] is b["status"]["conditions"][0]["type"]
