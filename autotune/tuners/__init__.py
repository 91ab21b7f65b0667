"""Tuners: who proposes the next configs to measure (contract on ``base.Tuner``).

    random  RandomTuner  uniform valid configs
    grid    GridTuner    ``space.enumerate()`` in order
    ga      GATuner      genetic search, fitness = measured throughput
    xgb     XGBTuner     search scored by an XGBoost cost model (needs ``feature_fn``)

``ModelGuidedSearch`` is the search policy behind ``XGBTuner``, usable with any
``cost_model.CostModel``; ``SearchOptions`` holds its knobs.
"""
from __future__ import annotations

from .base import KnobSpace, Tuner, config_key, cost_of
from .ga_tuner import GATuner
from .grid_tuner import GridTuner
from .model_guided import ModelGuidedSearch, SearchOptions
from .random_tuner import RandomTuner
from .xgb_tuner import XGBTuner

TUNERS = {"random": RandomTuner, "grid": GridTuner, "ga": GATuner, "xgb": XGBTuner}


def make_tuner(name: str, space, seed: int = 0, feature_fn=None, features_many=None, **kw) -> Tuner:
    """The tuner called ``name`` ("random", "grid", "ga", "xgb") over ``space``.

    ``feature_fn`` (config -> features) is required by "xgb" and ignored by the
    others, as is the optional batched ``features_many`` (configs -> array); other
    keywords go to the tuner's constructor (for "xgb": ``options=SearchOptions(...)``,
    ``model=``).
    """
    cls = TUNERS.get(name)
    if cls is None:
        raise ValueError(f"unknown tuner {name!r}; choose one of {', '.join(TUNERS)}")
    if cls is XGBTuner:
        if feature_fn is None:
            raise ValueError("the 'xgb' tuner needs feature_fn (config -> features), "
                             "e.g. FeatureCache().feature_fn(task)")
        return XGBTuner(space, feature_fn, seed=seed, features_many=features_many, **kw)
    return cls(space, seed=seed, **kw)


__all__ = ["GATuner", "GridTuner", "KnobSpace", "ModelGuidedSearch", "RandomTuner", "SearchOptions", "TUNERS",
           "Tuner", "XGBTuner", "config_key", "cost_of", "make_tuner"]
