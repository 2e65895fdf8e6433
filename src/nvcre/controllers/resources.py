"""The controllers' name for :mod:`nvcre.resources`, the one factory of nvcre's resource classes
(kept until every controller imports that module itself)."""

from __future__ import annotations

from nvcre.resources import *  # noqa: F403
from nvcre.resources import __all__ as __all__
