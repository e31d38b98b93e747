"""One descent loop for attacks and inversions, with pluggable step geometries."""
from stir.descent.geometry import FixedLengthStep, Geometry, L2Ball, LinfBall
from stir.descent.loop import DescentResult, Objective, descend

__all__ = ["DescentResult", "FixedLengthStep", "Geometry", "L2Ball", "LinfBall", "Objective", "descend"]
