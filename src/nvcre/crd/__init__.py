"""CustomResourceDefinitions generated from the API models.

``python -m nvcre.crd`` rewrites ``config/crd/`` and the structural schemas shipped for
validation (``nvcre/validation/schemas/``); ``python -m nvcre.crd --check`` fails when the
committed files differ from what the models generate.
"""

from nvcre.crd.generate import crd_for, generate_all, openapi_schema

__all__ = ["crd_for", "generate_all", "openapi_schema"]
