"""ConfuciuX (Kao, Jeong and Krishna, MICRO 2020): REINFORCE with an LSTM policy, then GA fine-tuning.

Stage 1 — **global search by RL.** An LSTM policy picks one knob per step in ``space.knobs`` order (the
MDP of the sequential env ``phaze_env/ArchSearchSeq-v0``: the input at step *k* is the previous
step's choice and the knob position; the reward comes at the end of the episode). Choices are masked
exactly as that env's ``action_masks()`` does (:meth:`DesignSpace.area_tables`: a value is allowed
iff some completion lies inside the area window), so every episode ends in the window; should a design
still fall outside, it earns ConfuciuX's constraint penalty ``penalty`` and is re-drawn without spending
an evaluation (the area model is free). An evaluated design earns ``throughput / best throughput so
far`` (in [0, 1]). The policy is driven directly by ask/tell rather than by stepping the env, because
the driver, not the strategy, owns evaluations. Updates are vanilla REINFORCE
with an exponential-moving-average baseline and an entropy bonus, one Adam step per ``batch`` episodes.

Stage 2 — **local fine-tuning by a GA.** After ``rl_fraction`` of the evaluation budget, the best designs
found so far seed :class:`baselines.genetic.GeneticAlgorithm` (small population, higher mutation rate),
which spends the rest of the budget, as ConfuciuX's second stage does.

The policy is small (32-unit LSTM, embeddings of width 16) and trains on CPU in milliseconds per episode.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from baselines.genetic import GeneticAlgorithm
from baselines.protocol import THROUGHPUT, score_of
from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Evaluation


NEG = -1e9  # masked logit: finite, so masked entries give 0 · (-1e9) = 0 in the entropy, not NaN


class KnobPolicy(nn.Module):
    """LSTM over the knob sequence; a shared head over the largest knob, masked to each knob's size."""

    def __init__(self, nvec: list[int], hidden: int = 32, embed: int = 16):
        super().__init__()
        self.nvec = list(nvec)
        self.width = max(nvec)
        self.choice_embedding = nn.Embedding(self.width + 1, embed)  # +1: "no previous choice"
        self.knob_embedding = nn.Embedding(len(nvec), embed)
        self.cell = nn.LSTMCell(2 * embed, hidden)
        self.head = nn.Linear(hidden, self.width)
        mask = torch.full((len(nvec), self.width), NEG)
        for k, n in enumerate(nvec):
            mask[k, :n] = 0.0
        self.register_buffer("mask", mask)

    def sample(self, generator: torch.Generator, allowed=None) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """One episode: knob indices, summed log-probability and summed entropy. ``allowed(prefix)``: a boolean
        array over the next knob's values, or ``None`` for all."""
        h = torch.zeros(1, self.cell.hidden_size)
        c = torch.zeros(1, self.cell.hidden_size)
        previous = torch.tensor([self.width])
        choices, log_prob, entropy = [], torch.zeros(()), torch.zeros(())
        for k in range(len(self.nvec)):
            x = torch.cat([self.choice_embedding(previous), self.knob_embedding(torch.tensor([k]))], dim=-1)
            h, c = self.cell(x, (h, c))
            logits = self.head(h)[0] + self.mask[k]
            if allowed is not None and (ok := allowed(choices)) is not None and ok.any():
                keep = torch.zeros(self.width, dtype=torch.bool)
                keep[: len(ok)] = torch.as_tensor(ok)
                logits = logits.masked_fill(~keep, NEG)
            probs = torch.softmax(logits, -1)
            choice = int(torch.multinomial(probs, 1, generator=generator))
            log_probs = torch.log_softmax(logits, -1)
            log_prob = log_prob + log_probs[choice]
            entropy = entropy - (probs * log_probs).sum()
            choices.append(choice)
            previous = torch.tensor([choice])
        return choices, log_prob, entropy


class ConfuciuX:
    """REINFORCE (LSTM policy) for ``rl_fraction`` of the budget, then GA fine-tuning."""

    name = "confuciux"

    def __init__(self, space: DesignSpace, seed: int = 0, budget: int = 100, rl_fraction: float = 0.7,
                 lr: float = 0.02, batch: int = 2, entropy: float = 0.01, baseline_decay: float = 0.8,
                 hidden: int = 32, penalty: float = -1.0, max_redraws: int = 200, ga_population: int = 6,
                 ga_mutation: float = 0.25, objectives: tuple[str, ...] = THROUGHPUT):
        self.space = space
        self.objectives = objectives  # the reward: the first (protocol.score_of)
        self.seed = seed
        self.rl_budget = max(1, int(round(rl_fraction * budget)))
        torch.manual_seed(seed)
        self.generator = torch.Generator().manual_seed(seed)
        self.policy = KnobPolicy(space.nvec, hidden=hidden)
        self.tables = space.area_tables()
        self.area_knob_count = len(space.area_knobs)
        self.optimiser = torch.optim.Adam(self.policy.parameters(), lr=lr)
        self.batch = batch
        self.entropy_weight = entropy
        self.baseline_decay = baseline_decay
        self.penalty = penalty
        self.max_redraws = max_redraws
        self.ga_population = ga_population
        self.ga_mutation = ga_mutation
        self.baseline: float | None = None
        self.losses: list[torch.Tensor] = []
        self.observed: dict[Design, float] = {}
        self.best = 0.0
        self.told = 0
        self.ga: GeneticAlgorithm | None = None
        self._episode: tuple[torch.Tensor, torch.Tensor] | None = None

    # --- REINFORCE ---------------------------------------------------------------------------------
    def _learn(self, reward: float, log_prob: torch.Tensor, entropy: torch.Tensor) -> None:
        self.baseline = reward if self.baseline is None else self.baseline_decay * self.baseline + (1 - self.baseline_decay) * reward
        advantage = reward - self.baseline
        self.losses.append(-advantage * log_prob - self.entropy_weight * entropy)
        if len(self.losses) >= self.batch:
            self.optimiser.zero_grad()
            torch.stack(self.losses).mean().backward()
            nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)
            self.optimiser.step()
            self.losses = []

    def _allowed(self, prefix: list[int]):
        if len(prefix) >= self.area_knob_count:
            return None
        ok, _ = self.tables.prefix(prefix)
        return ok

    def _rl_ask(self) -> Design:
        for _ in range(self.max_redraws):
            choices, log_prob, entropy = self.policy.sample(self.generator, self._allowed)
            design = self.space.decode(choices)
            if self.space.area_ok(design):
                self._episode = (log_prob, entropy)
                return design
            self._learn(self.penalty, log_prob, entropy)  # free: the area check needs no evaluation
        self._episode = None
        return self.space.sample(np.random.default_rng(self.seed + self.told))

    # --- protocol ----------------------------------------------------------------------------------
    def ask(self) -> Design:
        if self.told < self.rl_budget:
            return self._rl_ask()
        if self.ga is None:
            self.ga = GeneticAlgorithm(self.space, seed=self.seed, population=self.ga_population, elite=1,
                                       mutation=self.ga_mutation, initial=self.observed,
                                       objectives=self.objectives)
        return self.ga.ask()

    def tell(self, design: Design, evaluation: Evaluation | None) -> None:
        value = score_of(self.space, design, evaluation, self.objectives)
        self.observed[design] = value
        self.best = max(self.best, value)
        self.told += 1
        if self.ga is not None:
            self.ga.tell(design, evaluation)
        elif self._episode is not None:
            self._learn(value / self.best if self.best > 0 else 0.0, *self._episode)
            self._episode = None

    # --- checkpoints (python -m baselines.train) ---------------------------------------------------
    def state_dict(self) -> dict:
        return {"policy": self.policy.state_dict(), "optimiser": self.optimiser.state_dict(), "baseline": self.baseline,
                "best": self.best, "told": self.told, "generator": self.generator.get_state(),
                "observed": {tuple(self.space.encode(d)): v for d, v in self.observed.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimiser.load_state_dict(state["optimiser"])
        self.baseline, self.best, self.told = state["baseline"], state["best"], state["told"]
        self.generator.set_state(state["generator"])
        self.observed = {self.space.decode(list(k)): v for k, v in state["observed"].items()}
