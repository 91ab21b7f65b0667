"""The ``xgb`` tuner: model-guided search with the XGBoost ranking model.

    tuner = XGBTuner(task.space, cache.feature_fn(task), seed=0,
                     options=SearchOptions(population=64))   # knobs of the search
    # = ModelGuidedSearch(space, feature_fn, model=XGBCostModel(seed=0), options=...)

The search policy is ``model_guided.ModelGuidedSearch``; the model is
``cost_model.XGBCostModel``. This class only wires the two, so that ``tuner="xgb"``
names one well-tested combination.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from schedule.config import Config

from ..cost_model import CostModel, XGBCostModel
from .model_guided import ModelGuidedSearch, SearchOptions


class XGBTuner(ModelGuidedSearch):
    """``ModelGuidedSearch`` whose model is ``XGBCostModel(seed=seed)`` unless ``model`` is given."""

    def __init__(self, space, feature_fn: Callable[[Config], np.ndarray], seed: int = 0,
                 options: SearchOptions | None = None, model: CostModel | None = None,
                 features_many: Callable[[list[Config]], np.ndarray] | None = None):
        super().__init__(space, feature_fn, model if model is not None else XGBCostModel(seed=seed),
                         options=options, seed=seed, features_many=features_many)
