"""The STIR paper's published claims as data and the verdicts on them (``claims``, ``verdicts``).

Pure data and pure functions of measured values: no model, no measurement, no Hydra. The runner of
``experiment=paper`` builds each claim's evidence from its readings and calls ``Claim.judge``.
"""
from stir.paper.claims import CLAIMS, Claim, Protocol, Published, claim
from stir.paper.verdicts import FAILS, HOLDS, NOT_RUN, NOT_TESTABLE, Interval, Verdict

__all__ = ["CLAIMS", "Claim", "FAILS", "HOLDS", "Interval", "NOT_RUN", "NOT_TESTABLE", "Protocol", "Published", "Verdict", "claim"]
