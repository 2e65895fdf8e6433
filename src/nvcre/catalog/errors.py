"""Errors of the catalog: a broken catalog, an unknown category, a category that cannot be built."""

from __future__ import annotations

from collections.abc import Sequence


class CatalogError(Exception):
    """The shipped catalog itself is broken (raised at load time, never mid-run)."""


class CategoryNotFound(LookupError):
    """A Certification names a ``domain/variant`` the catalog does not have."""

    def __init__(self, domain: str, variant: str, known: Sequence[str] = ()) -> None:
        self.domain = domain
        self.variant = variant
        self.known = list(known)
        super().__init__(f"unknown certification category: {domain}/{variant}")

    def __str__(self) -> str:
        return str(self.args[0])


class BuildError(ValueError):
    """A category cannot be turned into a Workflow; the message names the offending field."""

    def __init__(self, message: str, *, field: str = "") -> None:
        self.field = field
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0])
