"""Architectures (a registry with named feature taps) and representation extraction."""
from stir.models.modes import frozen
from stir.models.normalize import Normalize, channel_stats
from stir.models.registry import Network, Tap, build, names, register
from stir.models.taps import representation, representations, tap_names

__all__ = [
    "Network", "Normalize", "Tap", "build", "channel_stats", "frozen", "names", "register",
    "representation", "representations", "tap_names",
]
