"""The certification catalog: entries as package data, and a Certification category -> Workflow.

Public API::

    load_catalog() -> Catalog                 # every entry, validated at load
    Catalog.lookup(domain, variant) -> Entry  # CategoryNotFound when unknown
    render_category(cert, index, nodes, ...) -> CategoryRender   # BuildError naming the field
"""

from nvcre.catalog.errors import BuildError, CatalogError, CategoryNotFound
from nvcre.catalog.loader import Catalog, Entry, EntryMeta, Parallelism, config_arch, load_catalog
from nvcre.catalog.render import APPLIED_OVERRIDES_ANNOTATION, CategoryRender, NoNodesMatch, render_category
from nvcre.catalog.template_data import TemplateData

__all__ = [
    "APPLIED_OVERRIDES_ANNOTATION",
    "BuildError",
    "Catalog",
    "CatalogError",
    "CategoryNotFound",
    "CategoryRender",
    "Entry",
    "EntryMeta",
    "NoNodesMatch",
    "Parallelism",
    "TemplateData",
    "config_arch",
    "load_catalog",
    "render_category",
]
