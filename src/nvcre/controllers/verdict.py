"""The Job and Workflow controllers' name for :mod:`nvcre.controllers.verdict_writes` (kept until
they import that module itself)."""

from __future__ import annotations

from nvcre.controllers.verdict_writes import announce as announce
from nvcre.controllers.verdict_writes import set_validation as set_validation
