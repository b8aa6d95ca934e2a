"""Spotlight-style domain-aware Bayesian optimisation (Sakhuja et al., HPCA 2023), and its ablation.

Spotlight's point is that a Gaussian process over *engineered, domain-aware features* of a design
(compute, memory hierarchy and balance figures) models throughput much better than one over raw knob
values. Here:

* **Features** (:func:`domain_features`): log₂ of peak tensor FLOP/s, vector throughput, on-chip buffer
  per core, buffer per MAC, HBM bandwidth per FLOP, HBM capacity, area, tensor-core aspect ratio,
  microbatch size, and the recompute flag — each min-max scaled over the whole space's value range. A space
  with knobs beyond PHAZE's (the system space's memory, links, topology, …) adds each extra knob's index,
  scaled to [0, 1], to these features.
  The ablation ("vanilla BO", :func:`index_features`) uses the raw knob indices scaled to [0, 1].
* **Model**: an exact GP with a Matern-5/2 ARD kernel (numpy, analytic likelihood gradient); targets are throughput / best so far, standardised. Hyper-parameters (log length-scales,
  signal and noise variance, weak log-normal priors) maximise the log marginal likelihood with L-BFGS-B
  from ``restarts`` starting points (one is the previous optimum) every ``refit_every`` proposals, and once the
  data outgrow ``10 · refit_every`` observations only when they have grown by a tenth since the last fit (a
  geometric schedule: hundreds of evaluations cost tens of fits, not one per three proposals); in between the GP is
  re-conditioned on the new data with the previous hyper-parameters. The likelihood's solves use the Cholesky
  factor (``cho_solve``).
* **Acquisition**: expected improvement, maximised over a pool of ``pool`` random in-window,
  not-yet-evaluated designs plus one-knob neighbours of the incumbent (local refinement).
* **Schedule**: ``warmup`` random designs first; afterwards a fraction ``explore`` of proposals are random.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_solve
from scipy.optimize import minimize
from scipy.stats import norm

from baselines.protocol import THROUGHPUT, score_of
from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Evaluation


# --------------------------------------------------------------------------------------------- features

# The knobs the accelerator and training features describe (PHAZE's); other knobs enter by their index.
_DESCRIBED_KNOBS = frozenset(DesignSpace().knobs)


def _extra_knobs(space: DesignSpace) -> list[str]:
    return [name for name in space.knobs if name not in _DESCRIBED_KNOBS]


def _raw_domain_features(design: Design, space: DesignSpace) -> list[float]:
    acc = design.accelerator(space.base)
    peak_flops = acc.peak_flops
    cores = acc.num_tc + acc.num_vc
    extra = [float(space.values(name).index(getattr(design, name))) for name in _extra_knobs(space)]
    return [
        math.log2(peak_flops),
        math.log2(acc.peak_vector_elements_per_s),
        math.log2(acc.buffer_mb / cores),
        math.log2(acc.buffer_mb * 2**20 / acc.macs_per_cycle),
        math.log2(acc.hbm_bandwidth_Bps / peak_flops),
        math.log2(acc.hbm_gb),
        math.log2(space.area_mm2(design)),
        math.log2(acc.tc_width / acc.tc_depth),
        math.log2(design.microbatch),
        float(design.recompute),
        *extra,
    ]


def _corner_designs(space: DesignSpace) -> list[Design]:
    """Designs at the extremes of every knob (for the features' min-max range)."""
    corners = []
    for pick in (0, -1):
        for k in range(len(space.nvec)):
            for other in (0, -1):
                indices = [other % n for n in space.nvec]
                indices[k] = pick % space.nvec[k]
                corners.append(space.decode(indices))
    return corners


class FeatureMap:
    """Design → feature vector in [0, 1] (domain-aware or raw knob indices)."""

    def __init__(self, space: DesignSpace, domain: bool):
        self.space = space
        self.domain = domain
        if domain:
            raw = np.array([_raw_domain_features(d, space) for d in _corner_designs(space)])
            self.low, self.high = raw.min(axis=0), raw.max(axis=0)
        else:
            self.low = np.zeros(len(space.knobs))
            self.high = np.array([max(n - 1, 1) for n in space.nvec], dtype=float)
        self.high = np.where(self.high > self.low, self.high, self.low + 1.0)
        self._memo: dict[Design, np.ndarray] = {}

    def __call__(self, designs: list[Design]) -> np.ndarray:
        rows = []
        for design in designs:
            if (row := self._memo.get(design)) is None:
                raw = _raw_domain_features(design, self.space) if self.domain else self.space.encode(design)
                row = self._memo[design] = (np.asarray(raw, dtype=float) - self.low) / (self.high - self.low)
            rows.append(row)
        return np.asarray(rows)


def domain_features(design: Design, space: DesignSpace) -> np.ndarray:
    return FeatureMap(space, domain=True)([design])[0]


def index_features(design: Design, space: DesignSpace) -> np.ndarray:
    return FeatureMap(space, domain=False)([design])[0]


# ------------------------------------------------------------------------------------------------- GP

def matern52(a: np.ndarray, b: np.ndarray, lengthscales: np.ndarray, variance: float) -> np.ndarray:
    d = np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) / lengthscales) ** 2, 0.0).sum(-1))
    s = math.sqrt(5.0) * d
    return variance * (1.0 + s + s * s / 3.0) * np.exp(-s)


class GaussianProcess:
    """Exact GP regression, Matern-5/2 ARD kernel, constant (zero after standardising) mean."""

    def __init__(self, restarts: int = 3, rng: np.random.Generator | None = None):
        self.restarts = restarts
        self.rng = rng or np.random.default_rng(0)
        self.theta: np.ndarray | None = None  # log lengthscales…, log variance, log noise

    def _unpack(self, theta: np.ndarray) -> tuple[np.ndarray, float, float]:
        return np.exp(theta[:-2]), float(np.exp(theta[-2])), float(np.exp(theta[-1])) + 1e-6

    def _neg_log_likelihood(self, theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Negative log marginal likelihood (plus weak log-normal priors) and its analytic gradient."""
        lengthscales, variance, noise = self._unpack(theta)
        diff2 = (x[:, None, :] - x[None, :, :]) ** 2 / lengthscales**2  # (n, n, d)
        r = np.sqrt(diff2.sum(-1))
        s = math.sqrt(5.0) * r
        decay = np.exp(-s)
        k_signal = variance * (1.0 + s + s * s / 3.0) * decay
        k = k_signal + noise * np.eye(len(x))
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            return 1e10, np.zeros_like(theta)
        alpha = cho_solve((chol, True), y)
        nll = 0.5 * y @ alpha + np.log(np.diag(chol)).sum() + 0.5 * len(x) * math.log(2 * math.pi)
        k_inv = cho_solve((chol, True), np.eye(len(x)))
        inner = k_inv - np.outer(alpha, alpha)  # dNLL/dθ = ½ tr(inner · dK/dθ)
        # Matern-5/2: dk/d(log ℓ_d) = v · e^{-√5 r} · (5/3)(1 + √5 r) · Δ_d² / ℓ_d²
        radial = variance * decay * (5.0 / 3.0) * (1.0 + s)
        grad_lengthscales = 0.5 * np.einsum("ij,ijd->d", inner, radial[:, :, None] * diff2)
        grad_variance = 0.5 * np.sum(inner * k_signal)
        grad_noise = 0.5 * np.trace(inner) * (noise - 1e-6)
        grad = np.r_[grad_lengthscales, grad_variance, grad_noise]
        # weak log-normal priors keep the hyper-parameters sensible on tiny data sets
        nll += 0.5 * (((theta[:-2] - math.log(0.5)) / 1.5) ** 2).sum() + 0.5 * ((theta[-1] - math.log(1e-2)) / 2.0) ** 2
        grad[:-2] += (theta[:-2] - math.log(0.5)) / 1.5**2
        grad[-1] += (theta[-1] - math.log(1e-2)) / 2.0**2
        return float(nll), grad

    def fit(self, x: np.ndarray, y: np.ndarray, optimise: bool = True) -> GaussianProcess:
        """Condition on (x, y); ``optimise=False`` keeps the previous hyper-parameters."""
        self.x = x
        self.y_mean, self.y_std = float(y.mean()), float(y.std()) or 1.0
        self.y = (y - self.y_mean) / self.y_std
        dims = x.shape[1]
        starts = [np.r_[np.full(dims, math.log(0.5)), 0.0, math.log(1e-2)]]
        if self.theta is not None:
            starts.append(self.theta)
        starts += [np.r_[self.rng.uniform(math.log(0.05), math.log(2.0), dims), self.rng.uniform(-1, 1),
                         self.rng.uniform(math.log(1e-4), math.log(1e-1))] for _ in range(max(self.restarts - len(starts), 0))]
        bounds = [(math.log(0.01), math.log(20.0))] * dims + [(math.log(0.05), math.log(20.0)), (math.log(1e-6), math.log(1.0))]
        if optimise or self.theta is None:
            best = None
            for start in starts:
                result = minimize(self._neg_log_likelihood, start, args=(x, self.y), jac=True, method="L-BFGS-B",
                                  bounds=bounds, options={"maxiter": 50})
                if best is None or result.fun < best.fun:
                    best = result
            self.theta = best.x
        lengthscales, variance, noise = self._unpack(self.theta)
        k = matern52(x, x, lengthscales, variance) + noise * np.eye(len(x))
        self._chol = np.linalg.cholesky(k + 1e-9 * np.eye(len(x)))
        self._alpha = cho_solve((self._chol, True), self.y)
        return self

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation, in the original units of ``y``."""
        lengthscales, variance, _ = self._unpack(self.theta)
        k_star = matern52(x, self.x, lengthscales, variance)
        mean = k_star @ self._alpha
        v = np.linalg.solve(self._chol, k_star.T)
        var = np.maximum(variance - (v * v).sum(0), 1e-12)
        return mean * self.y_std + self.y_mean, np.sqrt(var) * self.y_std


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float, xi: float = 0.01) -> np.ndarray:
    z = (mean - best - xi) / std
    return (mean - best - xi) * norm.cdf(z) + std * norm.pdf(z)


# ------------------------------------------------------------------------------------------- strategy

class Spotlight:
    """Domain-aware BO (``domain_features=True``) or its ablation on raw knob indices ("vanilla BO")."""

    def __init__(self, space: DesignSpace, seed: int = 0, domain_features: bool = True, warmup: int = 5,
                 explore: float = 0.1, pool: int = 300, restarts: int = 3, refit_every: int = 3,
                 max_observations: int = 400, objectives: tuple[str, ...] = THROUGHPUT):
        self.name = "spotlight" if domain_features else "vanilla_bo"
        self.space = space
        self.objectives = objectives  # the GP's target: the first (protocol.score_of)
        self.rng = np.random.default_rng(seed)
        self.features = FeatureMap(space, domain_features)
        self.gp = GaussianProcess(restarts=restarts, rng=self.rng)
        self.warmup = warmup
        self.explore = explore
        self.pool = pool
        self.max_observations = max_observations
        self.refit_every = refit_every
        self.fits = 0
        self.next_optimise = 0  # observations at which the hyper-parameters are next optimised
        self.observed: dict[Design, float] = {}
        self.sampled = 0

    def _random_new(self, tries: int = 200) -> Design:
        design = self.space.sample(self.rng)
        for _ in range(tries):
            if design not in self.observed:
                return design
            design = self.space.sample(self.rng)
        return design

    def _neighbours(self, design: Design) -> list[Design]:
        indices = self.space.encode(design)
        result = []
        for k, n in enumerate(self.space.nvec):
            for step in (-1, 1):
                if 0 <= indices[k] + step < n:
                    moved = list(indices)
                    moved[k] += step
                    candidate = self.space.decode(moved)
                    if self.space.area_ok(candidate):
                        result.append(candidate)
        return result

    def ask(self) -> Design:
        self.sampled += 1
        if len(self.observed) < self.warmup or self.rng.random() < self.explore:
            return self._random_new()
        designs = list(self.observed)[-self.max_observations:]
        y = np.array([self.observed[d] for d in designs])
        scale = y.max() if y.max() > 0 else 1.0
        optimise = len(y) >= self.next_optimise
        self.gp.fit(self.features(designs), y / scale, optimise=optimise)
        if optimise:
            self.next_optimise = max(len(y) + self.refit_every, math.ceil(1.1 * len(y)))
        self.fits += 1
        incumbent = max(self.observed, key=self.observed.get)
        # in first-drawn order (a set's order follows per-process string hashing: EI ties would break differently)
        pool = dict.fromkeys([self._random_new(20) for _ in range(self.pool)] + list(self._neighbours(incumbent)))
        candidates = [d for d in pool if d not in self.observed]
        if not candidates:
            return self._random_new()
        mean, std = self.gp.predict(self.features(candidates))
        ei = expected_improvement(mean, std, float(y.max() / scale))
        return candidates[int(np.argmax(ei))]

    def tell(self, design: Design, evaluation: Evaluation | None) -> None:
        self.observed[design] = score_of(self.space, design, evaluation, self.objectives)
