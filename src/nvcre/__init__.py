"""NVIDIA Cluster Readiness Engine: certify GPU clusters before production runs on them."""

__version__ = "0.1.0"
