"""The root of every nvcre kind: apiVersion, kind, metadata, spec and status."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from nvcre.api.v1alpha1.constants import API_VERSION, CATEGORY, GROUP, PLURALS, VERSION
from nvcre.api.v1alpha1.meta import NvcreModel
from nvcre.api.v1alpha1.printing import AGE, Column

__all__ = ["API_VERSION", "GROUP", "VERSION", "Column", "Resource"]


class Resource(NvcreModel):
    """A top-level Kubernetes object (nvcre.nvidia.com/v1alpha1 unless a subclass says otherwise)."""

    GROUP: ClassVar[str] = GROUP
    VERSION: ClassVar[str] = VERSION
    KIND: ClassVar[str]
    PLURAL: ClassVar[str]
    """``KIND``'s plural, from ``PLURALS`` unless the subclass names it (another group's kind)."""
    NAMESPACED: ClassVar[bool] = True
    HAS_STATUS: ClassVar[bool] = True
    COLUMNS: ClassVar[tuple[Column, ...]] = (AGE,)
    """``kubectl get``'s columns after NAME (the CRD's ``additionalPrinterColumns``), AGE last."""
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    """``kubectl get <short name>``: nv-prefixed, so none is another API's (``job``, ``wf``, ``cert``)."""
    CATEGORIES: ClassVar[tuple[str, ...]] = (CATEGORY,)
    """``kubectl get nvcre`` lists every kind of the group."""

    api_version: str = ""
    kind: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "KIND" in cls.__dict__ and "PLURAL" not in cls.__dict__:
            cls.PLURAL = PLURALS[cls.KIND]

    @model_validator(mode="after")
    def _identity(self) -> Resource:
        """apiVersion and kind must name this kind; empty ones are filled in."""
        expected = self.api_version_of()
        self.kind = self.kind or self.KIND
        self.api_version = self.api_version or expected
        if self.kind != self.KIND:
            raise ValueError(f"kind: expected {self.KIND!r}, got {self.kind!r}")
        if self.api_version != expected:
            raise ValueError(f"apiVersion: expected {expected!r}, got {self.api_version!r}")
        return self

    @classmethod
    def api_version_of(cls) -> str:
        return f"{cls.GROUP}/{cls.VERSION}"

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", ""))
