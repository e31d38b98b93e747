"""One descent loop for attacks and inversions, with pluggable step geometries."""
from stir.descent.geometry import (
    Adam, Constant, Cosine, Exponential, FixedLengthStep, Geometry, HalvingLengthStep, InverseTime, L2Ball, LinfBall,
    PlateauAdam, Schedule, ScheduledLengthStep,
)
from stir.descent.loop import DescentResult, Objective, descend

__all__ = [
    "Adam", "Constant", "Cosine", "DescentResult", "Exponential", "FixedLengthStep", "Geometry", "HalvingLengthStep", "InverseTime",
    "L2Ball", "LinfBall", "Objective", "PlateauAdam", "Schedule", "ScheduledLengthStep", "descend",
]
