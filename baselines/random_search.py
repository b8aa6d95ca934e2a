"""Random search: uniform over the designs inside the area window, without repeats."""

from __future__ import annotations

import numpy as np

from baselines.protocol import THROUGHPUT, score_of
from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Evaluation


class RandomSearch:
    """Samples knob indices uniformly, rejects designs outside the area window (free: the area model is
    analytic) and designs already proposed (up to ``max_tries`` draws; then a repeat is allowed)."""

    name = "random"

    def __init__(self, space: DesignSpace, seed: int = 0, max_tries: int = 1000,
                 objectives: tuple[str, ...] = THROUGHPUT):
        self.space = space
        self.objectives = objectives  # what its values are (it does not learn from them)
        self.rng = np.random.default_rng(seed)
        self.max_tries = max_tries
        self.seen: dict[Design, float] = {}

    def ask(self) -> Design:
        design = self.space.sample(self.rng)
        for _ in range(self.max_tries):
            if design not in self.seen:
                break
            design = self.space.sample(self.rng)
        return design

    def tell(self, design: Design, evaluation: Evaluation | None) -> None:
        self.seen[design] = score_of(self.space, design, evaluation, self.objectives)
