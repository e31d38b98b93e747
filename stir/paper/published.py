"""The paper as data: every number of Tables 1-3 of Nanda et al. (ICML 2022) with its place and
spread, and the passages the claims quote, read from the whole text (../shared/paper/nanda2022-stir.txt).

Pure data. ``NUMBERS`` holds each printed cell once, as ``Number(table, row, column, value, spread)``;
the spread is the ± the paper prints (over its 5 runs for Tables 1 and 3; Table 2 does not say over
what). ``QUOTES`` holds each statement a claim asks, verbatim, with its place. ``PROTOCOL`` holds what
the text states of how each number was measured, and nothing it does not state.

Two passages disagree on TRADES' and MART's beta: section 5.3 says 0.1, Appendix B says 1.0. Both are
quoted (``BETA``); the presets measure both (configs/zoo.yaml: ``trades``/``mart`` at 1.0, the
default; ``trades_b01``/``mart_b01`` at 0.1), and claim 12's first setting is beta 1.0.

Table 3 repeats Table 1's STIR, STIR_adv, CKA and agreement rows cell for cell (its STIR block is a
copy of Table 1's, caption included); only its Delta row is new. Its column header reads "ResNet18
AT (m1), ResNet18 Vanilla (m2)" for the third pair, as Table 1's does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

PAPER = "../shared/paper/nanda2022-stir.txt"


@dataclass(frozen=True)
class Number:
    """One printed number: ``table`` ("Table 1"), ``row`` (the quantity), ``column`` (the pair and
    direction, as the table heads it), ``value`` and the ``spread`` printed beside it (None: none printed)."""

    table: str
    row: str
    column: str
    value: float
    spread: Optional[float] = None

    def __str__(self) -> str:
        return f"{self.value:g}" + (f" ± {self.spread:g}" if self.spread is not None else "")


# Table 1 (section 3) and Table 3 (Appendix C) column heads: (pair, direction). "m1|m2" is STIR(m1|m2).
T1_PAIRS = {"vanilla / vanilla seed": "ResNet18 Vanilla (m1), ResNet18 Vanilla (m2)",
            "AT / AT seed": "ResNet18 AT (m1), ResNet18 AT (m2)",
            "AT / vanilla": "ResNet18 AT (m1), ResNet18 Vanilla (m2)"}


def _t1(table: str, row: str, values: Tuple[Tuple[float, float], ...]) -> Tuple[Number, ...]:
    """One row of Table 1/3: per pair, the m1|m2 and m2|m1 cells (value, spread) in column order."""
    out = []
    for pair, cells in zip(T1_PAIRS, (values[0:2], values[2:4], values[4:6])):
        for direction, (value, spread) in zip(("m1|m2", "m2|m1"), cells):
            out.append(Number(table, row, f"{pair}, {direction}", value, spread))
    return tuple(out)


TABLE1 = (
    _t1("Table 1", "STIR", ((0.605, 0.013), (0.562, 0.023), (0.934, 0.003), (0.939, 0.002), (0.405, 0.020),
                            (0.509, 0.011)))
    + _t1("Table 1", "STIR_adv", ((0.085, 0.004), (0.064, 0.004), (0.096, 0.007), (0.078, 0.005), (0.054, 0.004),
                                  (0.070, 0.004)))
    + tuple(Number("Table 1", "CKA", pair, value, 0.0) for pair, value in
            zip(T1_PAIRS, (0.967, 0.937, 0.536)))
    + _t1("Table 1", "agreement", ((0.521, 0.061), (0.347, 0.029), (0.891, 0.007), (0.901, 0.002), (0.140, 0.028),
                                   (0.555, 0.012)))
)
TABLE3_DELTA = _t1("Table 3", "Delta", ((8.588, 0.491), (8.570, 0.474), (17.106, 3.204), (16.210, 2.193),
                                        (19.270, 2.202), (7.368, 0.602)))

# Table 2 (section 4.1): cell (row m_i, column m_j) is STIR(m_j | m_i), CKA in parentheses.
T2_MODELS = ("AT it=10", "AT it=1", "Vanilla")
TABLE2_CELLS = {  # (m_i row = reference, m_j column = target): ((STIR, spread), (CKA, spread))
    ("AT it=10", "AT it=1"): ((0.93, 0.01), (0.89, 0.02)),
    ("AT it=10", "Vanilla"): ((0.51, 0.01), (0.56, 0.01)),
    ("AT it=1", "AT it=10"): ((0.86, 0.02), (0.89, 0.02)),
    ("AT it=1", "Vanilla"): ((0.52, 0.01), (0.64, 0.00)),
    ("Vanilla", "AT it=10"): ((0.41, 0.02), (0.56, 0.01)),
    ("Vanilla", "AT it=1"): ((0.34, 0.05), (0.64, 0.00)),
}
TABLE2_ACCURACY = {"AT it=10": ((51.5, 0.6), (80.4, 0.4)), "AT it=1": ((34.6, 0.6), (87.2, 2.1)),
                   "Vanilla": ((0.0, 0.0), (95.0, 0.1))}  # (robust % under l2 eps 1, clean %)
TABLE2 = tuple(
    Number("Table 2", q, f"STIR({j}|{i})" if q == "STIR" else f"CKA({i}, {j})", *cell[k])
    for (i, j), cell in TABLE2_CELLS.items() for k, q in enumerate(("STIR", "CKA"))
) + tuple(Number("Table 2", q, m, *acc[k]) for m, acc in TABLE2_ACCURACY.items()
          for k, q in enumerate(("robust accuracy %", "clean accuracy %")))

NUMBERS: Tuple[Number, ...] = TABLE1 + TABLE2 + TABLE3_DELTA


def number(table: str, row: str, column: str) -> Number:
    """The printed number of ``table``'s ``row`` and ``column`` (KeyError naming what exists)."""
    for n in NUMBERS:
        if (n.table, n.row, n.column) == (table, row, column):
            return n
    raise KeyError(f"no {table} {row} {column!r}; columns: {sorted({n.column for n in NUMBERS if n.row == row})}")


def table2_difference(more: str, less: str) -> float:
    """Table 2's STIR(less | more) - STIR(more | less): claim 7's quantity for one pair, m1 = ``more``."""
    return TABLE2_CELLS[(more, less)][0][0] - TABLE2_CELLS[(less, more)][0][0]


# What the text states of each protocol (nothing it does not state).
PROTOCOL: Dict[str, str] = {
    "Table 1": "ResNet18s on CIFAR10, different random initializations; 'All numbers are computed over 1000 random "
               "samples from CIFAR10 training set and averaged over 5 runs' (Table 1 caption). Width, epochs and "
               "inversion steps are not stated (100 epochs is stated only for section 4.2's incremental models).",
    "Table 2": "ResNet18: vanilla, AT with 10 and with 1 inner iteration; robust accuracy 'measured under l2, eps=1' "
               "(Table 2 caption). n and runs not stated.",
    "Table 3": "As Table 1 (its caption repeats Table 1's); Delta = (1/n) sum ||X - X'||_2 over controversial stimuli "
               "of eq. 8 (Appendix C); the eq. 8 starting point and step procedure are not stated.",
    "Figure 1": "ResNet18 on 5k, 10k, ..., 45k CIFAR10 training images (5k held out), 'At each timestep we train for "
                "100 epochs' (section 4.2); vanilla and AT.",
    "Figures 2-3, 5-9": "layer-wise / penultimate STIR on CIFAR10 training samples, S_r = linear CKA (section 3.3); "
                        "AT uses 'the l2 threat model with eps=1.0' (Appendix B).",
}

BETA = {"section 5.3": "We use $\\beta=0.1$ for our experiments, and additional details can be found in Appendix B.",
        "Appendix B": "Additionally TRADES and MART require another hyperparameter $\\beta$ (that balances adversarial "
                      "robustness and clean accuracy) which we set to $1.0$ for our experiments.",
        "defaults": "both are measured (trades/mart at 1.0, the default; trades_b01/mart_b01 at 0.1); claim 12's first "
                    "setting, and claims 13, 21, 22, is beta 1.0 (Appendix B), the 0.1 settings beside it"}


@dataclass(frozen=True)
class Quote:
    place: str
    text: str  # verbatim from the paper (its LaTeX kept)


QUOTES: Dict[str, Quote] = {q_key: q for q_key, q in {
    "cka_overestimates": Quote("section 3.3", "However, we find that such a similarity measurement would be an "
                               "overestimation of shared invariances between m1(Vanilla) and m2(Vanilla) which are much "
                               "lower when measured as STIR(m1|m2) and STIR(m2|m1), as shown in Table 1."),
    "at_high": Quote("section 3.3", "Indeed, we see that these two models have much higher values of STIR(m1(AT)|m2(AT)) "
                     "and STIR(m2(AT)|m1(AT))."),
    "directional": Quote("section 3.3", "Thus, when evaluating IRIs from a Vanilla model on a model trained using AT – one "
                         "can expect lower shared invariance than in the other direction."),
    "stir_adv": Quote("section 3.3", "we see that even in the case of m1(AT) and m2(AT) the shared invariance drops close "
                      "to 0. This is shown in the second row of Table 1."),
    "agreement": Quote("section 3.3", "We see that this relationship holds as lower STIR values for m1(Vanilla) and "
                       "m2(Vanilla) also correspond to less agreement in their predictions on X' and higher STIR values "
                       "for m1(AT) and m2(AT) correspond to higher agreement in their predictions"),
    "controversial": Quote("section 3.3 / Appendix C", "We find that indeed it’s significantly easier to generate "
                           "controversial stimuli for (m1(Vanilla), m2(Vanilla)) than for (m1(AT), m2(AT))"),
    "controversial_caption": Quote("Table 3 caption", "We see that controversial stimuli are “hard” to generate for "
                                   "higher STIR scores"),
    "robustness_premise": Quote("section 4.1", "a model trained using adversarial training (AT) with the usual 10 "
                                "iterations used to solve the inner maximization of AT (Madry et al., 2019) ($51.5\\%$), "
                                "and a model trained using AT but with only 1 iteration in the inner maximization loop, "
                                "which gives adversarial robustness somewhere in the middle ($34.6\\%$)"),
    "relative_robustness": Quote("section 4.1", "Table 2 shows comparison between these three models and confirms that "
                                 "STIR(m2|m1)>STIR(m1|m2) if adversarial robustness m1>m2 (measured here by robust "
                                 "accuracy)."),
    "incremental": Quote("section 4.2", "For both AT and Vanilla loss we see STIR(m_t|m_t-1) and STIR(m_t-1|m_t) increase "
                         "as we add more data. We also see that after a certain amount of data the STIR scores plateau"),
    "incremental_reverse": Quote("section 4.2 / Figure 1", "Adding more training data for (x-axis) leads to a monotonic "
                                 "increase in STIR between model at a given timestep (m_t) and the previous timestep "
                                 "(m_t-1) (in both directions)."),
    "layers": Quote("section 5.1", "We see that models trained with vanilla loss (Fig. 2(a) & 2(c)), later layers have lower "
                    "shared invariances than initial layers, indicated by a negative slope of lines of best fit. [...] "
                    "with adversarial training, both initial and final layers converge to (almost) similarly high levels "
                    "of shared invariances (indicated by flatter lines of fit in Fig. 2(b) & 2(d))."),
    "at_layers_high": Quote("section 5.1 / Figure 2 caption", "when the training procedure explicitly introduces "
                            "invariances (e.g.,adversarial training), then all layers converge to having similarly high "
                            "shared invariances."),
    "datasets": Quote("section 5.1", "We find that in general, initial layers tend to have higher shared invariances, as "
                      "indicated by the negative slope of the line of best fit in Fig. 3. [...] shared invariance "
                      "increases substantially (for all layers) when these models are trained using adversarial training"),
    "residual": Quote("section 5.2", "We find that in general, architectures with residual connections (ResNet18 and "
                      "ResNet34) have high shared invariances amongst themselves, as indicated by high values of STIR "
                      "amongst ResNets (for both vanilla and AT)."),
    "drops_across_types": Quote("Figures 4 and 8 captions", "We find that in general ResNets have high shared invariances "
                                "when trained using the same loss, but this shared invariance drops across training types."),
    "at_architectures_high": Quote("Figures 4 and 8 captions", "We also see that with AT, even models with different "
                                   "architectures converge to high shared invariances."),
    "methods": Quote("Figure 5 caption", "we find that other than TRADES and AT, these methods in fact do not have very "
                     "high shared invariance (as opposed to similarity between two ResNet18s trained using AT, which have "
                     "much higher values of shared invariance as shown in Fig. 2(b))."),
    "methods_mild": Quote("section 5.3", "Surprisingly, we find that models trained using these methods only have mild "
                          "levels of shared invariance, as indicated by lines of best fit around $0.5$ (see Fig. 5). This "
                          "is in contrast to the case of two ResNet18s trained using AT (see Fig. 2(b)) which leads to very "
                          "high shared invariance."),
    "methods_premise": Quote("section 5.3", "All 3 of these ResNets achieve similar clean and robust accuracy."),
    "vgg16_higher": Quote("Appendix D.3 / Figure 9 caption", "Fig 9 shows results on VGG16. These are much higher than "
                          "values for ResNet18, thus showing that these methods achieve robustness differently across "
                          "architectures."),
    "seed_stability": Quote("section 2.3 / Figure 8 caption", "We find that in practice randomly picked seeds give fairly "
                            "stable estimates. [...] We also see that this trend holds even when different seeds are used "
                            "to generate X'."),
    "linear_rbf": Quote("section 3.1", "While CKA, as proposed, can work with any kernel function, results show that Linear "
                        "CKA works just as well as RBF CKA, so for simplicity we use Linear CKA for all our experiments."),
}.items()}
