"""Finding and running the ``helm`` binary: always an argv list, never a shell."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HELM_ENV = "NVCRE_HELM"
"""Environment variable naming the helm binary (``--helm`` wins over it, PATH comes last)."""


class HelmNotFound(Exception):
    pass


def find_helm(explicit: str | None = None) -> str:
    """``explicit`` (``--helm``), then ``$NVCRE_HELM``, then ``helm`` on PATH."""
    candidate = explicit or os.environ.get(HELM_ENV)
    if candidate:
        if not (Path(candidate).is_file() and os.access(candidate, os.X_OK)):
            raise HelmNotFound(f"helm binary {candidate!r} is not an executable file")
        return candidate
    found = shutil.which("helm")
    if found is None:
        raise HelmNotFound(f"helm not found in PATH (install helm 3, or set --helm or ${HELM_ENV})")
    return found


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return (self.stdout + self.stderr).strip()


@dataclass(frozen=True)
class Helm:
    """One helm binary bound to a kubeconfig and context (passed as helm's own flags)."""

    binary: str
    kubeconfig: str | None = None
    context: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """helm's own connection variables (``HELM_KUBEAPISERVER``, ``HELM_KUBETOKEN``...): in the
    environment, not in argv, so a token stays out of the process list."""

    def argv(self, args: Sequence[str]) -> list[str]:
        argv = [self.binary, *args]
        if self.kubeconfig:
            argv += ["--kubeconfig", self.kubeconfig]
        if self.context:
            argv += ["--kube-context", self.context]
        return argv

    def run(self, args: Sequence[str], timeout: float = 900) -> Result:
        env = {**os.environ, **self.env} if self.env else None
        done = subprocess.run(
            self.argv(args), capture_output=True, text=True, check=False, timeout=timeout, env=env
        )
        return Result(done.returncode, done.stdout, done.stderr)
