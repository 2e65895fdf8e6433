"""nvcre-manager uses exactly what config/rbac grants it, over the whole session (this module runs last).

The session's control plane keeps an audit log of the manager's requests (its users, its user
agent; :mod:`nvcre.testing.audit`), whichever identity a test ran it with: cluster-admin as the
shared ``manager`` fixture does, or its own ServiceAccount as test_rbac does. Every request must
be one the ClusterRole or the leader-election Role grants, and none may have been refused; and
every verb they grant must have been used by some test: a grant no test uses is either not
needed (drop it from src/nvcre/controllers/rbac.py) or lacks a test (but those of
:data:`TIME_GATED`, used only after more time than a test waits).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lightkube import Client
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from nvcre.testing.access import load_manifests
from nvcre.testing.audit import Access, Grant, accesses, bound_to_manager, by_manager, compare, denied, grants
from nvcre.testing.binaries import repo_root
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.manager import ManagerProcess

INTEGRATION = Path(__file__).parent
TIME_GATED = {
    "delete reportexports.nvcre.nvidia.com": "an ended ReportExport is deleted its retention after it "
    "ended, at least 1h (admission refuses less); tests/unit/test_reportexport_retention.py steps a "
    "clock past it",
}
"""Grants the manager uses only after more time than an integration test waits, each with where
that use is tested instead."""


def plurals(kube: Client) -> dict[tuple[str, str], str]:
    """(apiVersion, kind) -> plural of every served custom resource."""
    found = {}
    for crd in kube.list(CustomResourceDefinition):
        spec = crd.spec
        for version in spec.versions:
            found[(f"{spec.group}/{version.name}", spec.names.kind)] = spec.names.plural
    return found


def used(control_plane: ControlPlane, kube: Client) -> list[Access]:
    known = plurals(kube)
    return accesses(
        by_manager(control_plane.audit_events()), lambda api_version, kind: known[(api_version, kind)]
    )


def granted() -> list[Grant]:
    """What config/rbac grants the manager (not the roles for people it also holds)."""
    return grants(bound_to_manager(load_manifests(sorted((repo_root() / "config" / "rbac").glob("*.yaml")))))


def test_no_request_of_the_manager_was_refused(control_plane: ControlPlane, manager: ManagerProcess) -> None:
    events = by_manager(control_plane.audit_events())
    assert any(e["verb"] == "watch" for e in events), "the audit log holds no request of the manager"
    assert denied(events) == []


def test_every_verb_the_manager_used_is_granted(
    control_plane: ControlPlane, kube: Client, manager: ManagerProcess
) -> None:
    assert compare(used(control_plane, kube), granted()).not_granted == []


def test_every_granted_verb_was_used(
    control_plane: ControlPlane, kube: Client, request: pytest.FixtureRequest
) -> None:
    ran = {Path(str(item.path)).name for item in request.session.items}
    missing = sorted(p.name for p in INTEGRATION.glob("test_*.py") if p.name not in ran)
    if missing or request.config.option.keyword or request.config.option.markexpr:
        pytest.skip(
            f"only the whole integration suite uses every grant (not run: {', '.join(missing) or '-k/-m'})"
        )
    never_used = compare(used(control_plane, kube), granted()).never_used
    assert [grant for grant in never_used if grant not in TIME_GATED] == []
