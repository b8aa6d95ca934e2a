"""What a strategy costs per evaluation on a benchmark task, apart from the evaluations themselves.

Run: ``python benchmarks/bench_strategy_cost.py [--task NAME] [--budget 200] [--seed 0] [--strategy NAME ...]``
(defaults: the system-space task ``tiny-gpt2/system-20kW/throughput``, 200 evaluations, the GP strategies with
random search and TPE for scale). For each strategy one run of ``budget`` evaluations through
:func:`baselines.run_strategy`'s own loop: the seconds spent in the strategy's ``ask``/``tell`` (its model fits, pool
scoring, sampler) per evaluation, the seconds spent evaluating, and the normalised score reached (the task's
certified optimum, :mod:`phaze_env.tasks`; ``nan`` while the stored optimum is stale). Evaluations come from the shared result cache after their first run, so
the strategy column is the one to compare.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from baselines import make_strategy  # noqa: E402
from baselines.protocol import evaluate_in_window  # noqa: E402
from experiments.task_board import normalised_curve  # noqa: E402
from phaze_env.tasks import TaskError, get_task, load_reference  # noqa: E402

DEFAULT_TASK = "tiny-gpt2/system-20kW/throughput"
DEFAULT_STRATEGIES = ("spotlight", "vanilla_bo", "optuna_gp", "optuna_tpe", "random")


def measure(task_name: str, strategy: str, budget: int, seed: int) -> dict[str, float]:
    """One run: strategy seconds, evaluation seconds and the final normalised score."""
    task = get_task(task_name)
    try:
        reference = load_reference(task)
    except TaskError:  # a stale stored optimum: time the strategy anyway, without a normalised score
        reference = None
    workload, cluster, space = task.workload_spec(), task.cluster(), task.design_space()
    instance = make_strategy(strategy, space=space, seed=seed, budget=budget, workload=workload, cluster=cluster,
                             objectives=task.objectives)
    strategy_s = evaluate_s = 0.0
    designs, throughputs = [], []
    try:
        for _ in range(budget):
            started = time.perf_counter()
            design = instance.ask()
            asked = time.perf_counter()
            evaluation = evaluate_in_window(design, workload, cluster, space)
            evaluated = time.perf_counter()
            instance.tell(design, evaluation)
            strategy_s += (asked - started) + (time.perf_counter() - evaluated)
            evaluate_s += evaluated - asked
            designs.append(design)
            throughputs.append(float(evaluation.throughput_samples_s) if evaluation and evaluation.feasible else 0.0)
    finally:
        if hasattr(instance, "close"):
            instance.close()
    score = normalised_curve(task, reference, designs, throughputs)[-1] if reference is not None else math.nan
    return {"strategy_s": strategy_s, "evaluate_s": evaluate_s, "score": score}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default=DEFAULT_TASK)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategy", action="append", default=None)
    args = parser.parse_args(argv)
    strategies = args.strategy or list(DEFAULT_STRATEGIES)
    print(f"task {args.task}, {args.budget} evaluations, seed {args.seed}")
    print(f"{'strategy':<14}{'strategy s':>12}{'ms / eval':>11}{'evaluate s':>12}{'score':>8}")
    for i, name in enumerate(strategies, 1):
        row = measure(args.task, name, args.budget, args.seed)
        print(f"{name:<14}{row['strategy_s']:>12.1f}{1e3 * row['strategy_s'] / args.budget:>11.1f}"
              f"{row['evaluate_s']:>12.1f}{row['score']:>8.3f}   [{i}/{len(strategies)}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
