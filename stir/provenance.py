"""What every result stores beside itself so that it can be reproduced: versions and identities."""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from pathlib import Path
from typing import Dict, Union

from importlib.metadata import PackageNotFoundError, version

_PACKAGES = ("stir-lab", "torch", "torchvision", "lightning", "torchattacks", "numpy", "wandb", "omegaconf", "hydra-core")


def library_versions() -> Dict[str, str]:
    """Python and the versions of the packages that results depend on."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    import torch

    out["torch"] = torch.__version__  # with the build tag (+cu130, +cpu): the metadata version lacks it
    out["cuda"] = str(torch.version.cuda)
    out["git_commit"] = _git_commit()
    return out


def _git_commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        return result.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def file_sha256(path: Union[str, os.PathLike], chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, as ``sha256sum`` prints it: the one file hash of the project (checkpoints,
    shipped and catalogued weights files)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()
