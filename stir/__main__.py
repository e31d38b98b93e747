"""``python -m stir``: the install check (``stir.cli.install_check``), one line, exit 2 when the set-up is broken."""
import sys

from stir.cli import install_check


def _project() -> None:
    import stir.experiments  # noqa: F401  (the evaluate.py application and every package below it)


def _robustbench() -> None:
    from stir.models.sources import robustbench

    robustbench._import()  # as robustbench: models import it (pyautoattack registered as autoattack)


if __name__ == "__main__":
    sys.exit(install_check(_project, importers={"robustbench": _robustbench}))
