"""Offline validation of nvcre manifests: the schema rules the API server checks, without a cluster."""

from nvcre.validation.manifests import Finding, ObjectReport, validate_documents, validate_file
from nvcre.validation.schema import FieldError, validate

__all__ = ["FieldError", "Finding", "ObjectReport", "validate", "validate_documents", "validate_file"]
