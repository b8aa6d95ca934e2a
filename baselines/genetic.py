"""A standalone genetic algorithm over knob indices (also ConfuciuX's fine-tuning stage).

Generational GA with elitism: tournament selection, uniform crossover, per-knob mutation to a
neighbouring value (±1 index, as the knobs are ordered) or, less often, a random value. Children
outside the area window, or already evaluated, are re-drawn (both checks are free); evaluated designs
are memoised so the budget is only spent on new designs.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from baselines.protocol import THROUGHPUT, score_of
from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Evaluation


class GeneticAlgorithm:
    """``population`` designs per generation, ``elite`` kept unchanged, mutation probability per knob
    ``mutation`` (default 1/number of knobs), ``crossover`` probability, ``tournament`` size. ``initial``:
    optional seed designs with known fitness (ConfuciuX hands over its RL stage's best)."""

    name = "genetic"

    def __init__(self, space: DesignSpace, seed: int = 0, population: int = 10, elite: int = 2,
                 mutation: float | None = None, crossover: float = 0.9, tournament: int = 3,
                 initial: dict[Design, float] | None = None, max_tries: int = 200,
                 objectives: tuple[str, ...] = THROUGHPUT):
        if population < 2 or not 0 <= elite < population:
            raise ValueError(f"need population ≥ 2 and 0 ≤ elite < population, got {population}, {elite}")
        self.space = space
        self.objectives = objectives  # fitness: the first (protocol.score_of)
        self.rng = np.random.default_rng(seed)
        self.population_size = population
        self.elite = elite
        self.mutation = mutation if mutation is not None else 1.0 / len(space.nvec)
        self.crossover = crossover
        self.tournament = tournament
        self.max_tries = max_tries
        self.fitness: dict[Design, float] = dict(initial or {})
        self.population: list[Design] = sorted(self.fitness, key=self.fitness.get, reverse=True)[:population]
        self.pending: deque[Design] = deque()
        self.generation: list[Design] = []
        if not self.population:
            self._queue([self._fresh() for _ in range(population)])
        else:
            self._breed()

    # --- ask / tell --------------------------------------------------------------------------------
    def ask(self) -> Design:
        if not self.pending:
            self._breed()
        return self.pending.popleft()

    def tell(self, design: Design, evaluation: Evaluation | None) -> None:
        self.fitness[design] = score_of(self.space, design, evaluation, self.objectives)
        if design in self.generation and all(d in self.fitness for d in self.generation) and not self.pending:
            self.population = self._survivors(self.population + self.generation)
            self.generation = []

    # --- operators ---------------------------------------------------------------------------------
    def _queue(self, designs: list[Design]) -> None:
        unique = list(dict.fromkeys(designs))
        self.generation = unique
        self.pending.extend(unique)

    def _survivors(self, designs: list[Design]) -> list[Design]:
        # first-seen order before the stable sort: a set's order follows string hashing, which differs per process
        # (PYTHONHASHSEED), so ties in fitness (every infeasible design scores 0) would pick other survivors each run
        ranked = sorted(dict.fromkeys(designs), key=lambda d: self.fitness.get(d, 0.0), reverse=True)
        return ranked[:self.population_size]

    def _fresh(self) -> Design:
        for _ in range(self.max_tries):
            design = self.space.sample(self.rng)
            if design not in self.fitness:
                return design
        return self.space.sample(self.rng)

    def _select(self) -> list[int]:
        contenders = self.rng.choice(len(self.population), size=min(self.tournament, len(self.population)), replace=False)
        winner = max(contenders, key=lambda i: self.fitness.get(self.population[i], 0.0))
        return self.space.encode(self.population[int(winner)])

    def _child(self) -> Design:
        nvec = self.space.nvec
        for _ in range(self.max_tries):
            a, b = self._select(), self._select()
            genes = [x if self.rng.random() < 0.5 else y for x, y in zip(a, b)] if self.rng.random() < self.crossover else a
            for k, n in enumerate(nvec):
                if n > 1 and self.rng.random() < self.mutation:
                    if self.rng.random() < 0.7:
                        genes[k] = int(np.clip(genes[k] + self.rng.choice((-1, 1)), 0, n - 1))
                    else:
                        genes[k] = int(self.rng.integers(n))
            design = self.space.decode(genes)
            if self.space.area_ok(design) and design not in self.fitness and design not in self.pending:
                return design
        return self._fresh()

    def _breed(self) -> None:
        if not self.population:
            self.population = self._survivors(list(self.fitness)) or [self._fresh()]
        # The elite stay in the population without re-evaluation; only children are queued.
        children = [self._child() for _ in range(self.population_size - self.elite)]
        self._queue(children)
