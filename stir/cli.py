"""What the entry points share: a mistake in the command prints one line, not a traceback; the
command line is checked against the schema before Hydra reads it (``check_command_line``)."""
from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type

from stir.config.argv import Command  # noqa: F401  (what an entry point's command line is checked against)

log = logging.getLogger("stir")

# What every entry point expects to fail on besides its own errors: a file that cannot be read or
# written (OSError, whose message names the file: stir.atomic names it on every write) and the input
# checks (ValueError and its kinds: ConfigError, SourceError, WeightsMismatch, DataSourceError, ...).
EXPECTED_ERRORS: Tuple[Type[BaseException], ...] = (OSError, ValueError)


# What an allocator says when memory runs out: torch's CUDA OutOfMemoryError, its CPU allocator's
# "DefaultCPUAllocator: can't allocate memory", and Python's own MemoryError.
_OUT_OF_MEMORY = ("out of memory", "can't allocate memory", "cannot allocate memory", "not enough memory")


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is an allocation that failed (not a bug: a batch too large for this machine)."""
    if isinstance(err, MemoryError):
        return True
    return isinstance(err, RuntimeError) and any(s in str(err).lower() for s in _OUT_OF_MEMORY)


@contextmanager
def one_line_errors(*errors: Type[BaseException], memory_hint: str = "") -> Iterator[None]:
    """Turn ``errors`` (the user's to fix: a bad key, a refused run folder) into ``error: <message>`` and exit 2.

    With ``memory_hint`` (the key to change, e.g. "lower execution.batch_size"), an allocation that
    fails is one line too: the allocator's first line and the hint, instead of a traceback.
    ``HYDRA_FULL_ERROR=1`` lets them through with the full traceback, as Hydra does for its own errors.
    """
    caught: Tuple[Type[BaseException], ...] = tuple(errors)
    try:
        yield
    except caught as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        _refuse(str(err))
    except (RuntimeError, MemoryError) as err:
        if not memory_hint or not out_of_memory(err) or os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        said = (str(err).strip().splitlines() or [type(err).__name__])[0]
        _refuse(f"out of memory ({said[:300]}): {memory_hint}")


def _refuse(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    print("(HYDRA_FULL_ERROR=1 shows where it was raised)", file=sys.stderr)
    sys.exit(2)


def check_command_line(argv: Sequence[str], command: Command) -> None:
    """``--help`` from the schema; an unknown key, preset or value as one line and exit 2, before Hydra.

    Keys and group choices are checked against the schema (close matches, moved keys: ``stir.config.argv``);
    then the whole configuration, Hydra's own node included, is composed as ``hydra.main`` will compose it
    (each job of a sweep; ``--config-dir``, ``--config-name`` and ``hydra.searchpath`` too) and refused if it
    names code or a file outside the run folder (``stir.config.composed``); a value of the wrong type is one
    line too. ``--config-name`` and the like skip the schema check (another schema may be composed).
    """
    from stir.config import ConfigError
    from stir.config.argv import check_overrides, parse, refuse_code
    from stir.config.composed import check_composed

    line = parse(argv)
    with one_line_errors(ConfigError):
        refuse_code(line)  # before everything: whichever config is composed, no override names code
    if line.wants_help and not line.other_config:
        print(command.help(), end="")
        sys.exit(0)
    if _hydra_prints_only(line):
        return
    with one_line_errors(ConfigError):
        if not line.other_config:
            check_overrides(line, command.tree(line), command.groups, command.moved, refused=command.refused)
        check_composed(line, command.config_dir, command.config_name)  # the guard: what Hydra will run


def _hydra_prints_only(line: Any) -> bool:
    """--help (of another config), --hydra-help, --version, --shell-completion: Hydra prints, composes nothing it runs."""
    return any(f.split("=", 1)[0] in {"--help", "-h", "--hydra-help", "--version", "--shell-completion", "-sc"}
               for f in line.flags)


def check_line(line: Any, command: Command) -> None:
    """The checks of ``check_command_line`` on a parsed line (``stir.config.argv.CommandLine``), raising
    ``ConfigError`` (one line) instead of exiting: the library's ``open_evaluation`` uses them too (it
    composes without Hydra's run, so the application's tree is what is composed here)."""
    from stir.config.argv import check_overrides, refuse_code

    refuse_code(line)  # the library's override strings too: no override names code
    check_overrides(line, command.tree(line), command.groups, command.moved, refused=command.refused)
    if not line.multirun and not line.introspection:
        _trial_compose(command, [o.raw for o in line.overrides if not o.key.startswith("hydra")])


def _trial_compose(command: Command, overrides: List[str]) -> None:
    """Compose the config as Hydra will; its error (a value of the wrong type ...) as one ConfigError."""
    from stir.config.composed import composition_error
    from stir.config.store import compose

    try:
        compose(command.config_dir, command.config_name, overrides)
    except Exception as err:  # Hydra's and OmegaConf's composition errors, whatever their class
        raise composition_error(err) from err


def install_check(project: Callable[[], None] = lambda: None,
                  importers: Optional[Mapping[str, Callable[[], None]]] = None) -> int:
    """``python -m stir``: the set-up works (torch, torchvision with its compiled operators, Lightning,
    Hydra, stir itself); one line either way, exit status 2 with the fix when it does not.

    A torchvision built for another torch (pip falling back to mismatched wheels when the CPU index
    was unreachable) imports with ``operator torchvision::nms does not exist``, or later when a
    data transform first needs it. ``project`` imports the rest of the project (``python -m stir``:
    the application and everything below it). Then each installed extra (``EXTRAS``) must import:
    its module, or ``importers[extra]()`` where the project imports it its own way (robustbench through
    ``stir.models.sources.robustbench``, which registers pyautoattack as autoattack).
    """
    from importlib import metadata

    def fail(message: str) -> int:
        print(f"error: {message}", file=sys.stderr)
        return 2

    def first_line(err: BaseException) -> str:
        return (str(err).strip().splitlines() or [type(err).__name__])[0]

    try:
        import torch
    except Exception as err:  # a broken wheel raises more than ImportError
        return fail(f"torch cannot be imported ({first_line(err)}): pip install torch torchvision, then pip install -e .")
    try:
        import torchvision

        _torchvision_ops()
    except Exception as err:
        try:
            version = metadata.version("torchvision")
        except metadata.PackageNotFoundError:
            version = "(not installed)"
        return fail(f"torchvision {version} does not work with torch {torch.__version__} ({first_line(err)}): install "
                    "both from one index, e.g. pip install --force-reinstall torch torchvision (the default index), "
                    f"then {reinstall_line(installed_extras())} (the extras installed here, and their pins)")
    try:
        import hydra
        import lightning

        project()
    except Exception as err:
        return fail(f"the project does not import ({first_line(err)}): pip install -e \".[dev]\" in this environment")
    extras = installed_extras()
    for extra in extras:
        broken = extra_error(extra, (importers or {}).get(extra))
        if broken:
            return fail(f"the {extra} extra is installed but does not import ({broken}): {EXTRAS[extra][2]}")
    device = f"cuda ({torch.cuda.device_count()} device(s))" if torch.cuda.is_available() else "cpu"
    print(f"stir ok: torch {torch.__version__} on {device}, torchvision {torchvision.__version__}, "
          f"lightning {lightning.__version__}, hydra {hydra.__version__}; extras that import: "
          f"{', '.join(extras) or 'none installed'}")
    return 0


# pyproject's optional extras: {extra: (the distribution that says it is installed, what must import,
# the line that repairs it)}. robustbench 1.1.1 imports pkg_resources, which setuptools 81 removed: a
# later `pip install` that upgrades setuptools breaks it silently (issue 55).
EXTRAS: Dict[str, Tuple[str, str, str]] = {
    "robustbench": ("robustbench", "robustbench.utils",
                    'pip install "setuptools<81" (robustbench imports pkg_resources), or pip install -e ".[robustbench]"'),
    "timm": ("timm", "timm", 'pip install -e ".[timm]"'),
    "cluster": ("hydra-submitit-launcher", "hydra_plugins.hydra_submitit_launcher.submitit_launcher",
                'pip install -e ".[cluster]"'),
    "dashboard": ("wandb-workspaces", "wandb_workspaces", 'pip install -e ".[dashboard]"'),
}


def installed_extras() -> List[str]:
    """The extras of ``EXTRAS`` whose distribution is installed in this environment."""
    from importlib import metadata

    out = []
    for extra, (distribution, _, _) in EXTRAS.items():
        try:
            metadata.distribution(distribution)
        except metadata.PackageNotFoundError:
            continue
        out.append(extra)
    return out


def reinstall_line(extras: Sequence[str]) -> str:
    """``pip install -e .`` with the installed extras (``.[dev,robustbench]``): the reinstall keeps them
    and their pins (setuptools<81 for robustbench)."""
    return f'pip install -e ".[{",".join(["dev", *extras])}]"'


def extra_error(extra: str, importer: Optional[Callable[[], None]] = None) -> str:
    """"" when the extra imports (``importer()``, else its module), else the first line of its import error."""
    import importlib
    import warnings

    target = EXTRAS[extra][1]
    try:
        with warnings.catch_warnings():  # robustbench's pkg_resources deprecation: the check says what matters
            warnings.simplefilter("ignore")
            if importer is not None:
                importer()
            else:
                importlib.import_module(target)
    except Exception as err:  # a broken install raises more than ImportError
        return (str(err).strip().splitlines() or [type(err).__name__])[0]
    return ""


def _torchvision_ops() -> None:
    """Touch torchvision's compiled operators (missing when it was built for another torch)."""
    import torch
    import torchvision  # noqa: F401  (registers torch.ops.torchvision)

    torch.ops.torchvision.nms
