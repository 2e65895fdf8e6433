"""What a LogProfile's schema cannot say: its patterns compile with RE2 and capture what they
must, its layout parses, its examples match (the checks the controllers make before reading a
log, made before the GPUs run)."""

from __future__ import annotations

from typing import Any

from nvcre.measure.profile import ProfileError, compile_profile


def profile_problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    """(field path, problem) of a LogProfile that does not compile; empty when it does."""
    try:
        compile_profile(document)
    except ProfileError as error:
        text = str(error)
        path, _, problem = text.partition(": ")
        return [(path, problem)] if path.startswith("spec.") and problem else [("", text)]
    return []
