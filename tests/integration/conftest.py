"""Integration tests run against a real etcd + kube-apiserver (+ kwok); see docs/testing.md."""

from nvcre.testing.fixtures import *  # noqa: F403 - re-export the fixtures to pytest
