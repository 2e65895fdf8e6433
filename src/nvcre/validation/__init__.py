"""Offline validation of nvcre manifests: the schema rules the API server checks, without a cluster."""

from nvcre.validation.findings import Finding
from nvcre.validation.manifests import ObjectReport, log_profiles, validate_documents, validate_file
from nvcre.validation.schema import FieldError, validate

__all__ = [
    "FieldError",
    "Finding",
    "ObjectReport",
    "log_profiles",
    "validate",
    "validate_documents",
    "validate_file",
]
