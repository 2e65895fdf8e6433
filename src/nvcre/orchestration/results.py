"""The Workflow controller's name for :mod:`nvcre.orchestration.result_configmaps`, the node-result
ConfigMaps' codec (kept until it imports that module itself)."""

from __future__ import annotations

from nvcre.orchestration.result_configmaps import *  # noqa: F403
from nvcre.orchestration.result_configmaps import __all__ as __all__
