"""What the entry points share: a mistake in the command prints one line, not a traceback."""
from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from typing import Iterator, Tuple, Type

log = logging.getLogger("stir")

# What every entry point expects to fail on besides its own errors: a file that cannot be read or
# written (OSError, whose message names the file: stir.atomic names it on every write) and the input
# checks (ValueError and its kinds: ConfigError, SourceError, WeightsMismatch, DataSourceError, ...).
EXPECTED_ERRORS: Tuple[Type[BaseException], ...] = (OSError, ValueError)


@contextmanager
def one_line_errors(*errors: Type[BaseException]) -> Iterator[None]:
    """Turn ``errors`` (the user's to fix: a bad key, a refused run folder) into ``error: <message>`` and exit 2.

    ``HYDRA_FULL_ERROR=1`` lets them through with the full traceback, as Hydra does for its own errors.
    """
    caught: Tuple[Type[BaseException], ...] = tuple(errors)
    try:
        yield
    except caught as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {err}", file=sys.stderr)
        print("(HYDRA_FULL_ERROR=1 shows where it was raised)", file=sys.stderr)
        sys.exit(2)
