"""Judging the measures themselves: pure functions of representations (no models, no files).

    layer_matching.py   Kornblith et al. 2019's layer-identification test (accuracy of finding the
                        corresponding layer of a seed model)
    grounding.py        Ding et al. 2021's tests: rank correlation of each measure's dissimilarity
                        with functional difference (depth, PC deletion, robustness)
"""
