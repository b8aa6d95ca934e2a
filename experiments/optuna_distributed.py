"""One Optuna study, many worker processes (or machines), shared storage (PostgreSQL, MySQL, SQLite).

    # on every machine (or --workers N here): the same --storage and --study-name join the same study
    python -m experiments.optuna_distributed --storage postgresql://user@db-host/optuna \\
        --study-name phaze-gpt2-xl-tpe --workload gpt2-xl --sampler tpe --trials 500 --workers 4

Every worker runs :func:`phaze_env.objective.make_objective`'s objective on its own process; Optuna's
RDB storage hands out trial numbers atomically (the parent creates the schema and the study before
starting workers: concurrent schema creation on an empty PostgreSQL database fails), and ``MaxTrialsCallback`` caps the *study's* total at
``--trials`` (counting every worker's trials). ``--workers N`` starts N local worker processes (each is this
command with ``--workers 1``); a worker prints one JSON line with the trial numbers it ran. The parent
prints the study's best value and design as JSON.

``--space tiny`` is a 16-combination space for tests (with ``--sampler bruteforce`` the study stops by
itself once every combination has been tried).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Sequence

from phaze_env.cli import OneLineParser, add_cluster_size_options, positive_int
from phaze_env.design import DesignSpace
from phaze_env.evaluate import Cluster
from phaze_env.objective import SAMPLERS, make_objective, make_sampler, storage_url

SPACES = {
    "tiny": lambda: DesignSpace.reduced(num_tc=(4, 16), num_vc=(4, 16), tc_width=(128,), buffer_mb=(8,), hbm_gb=(32.0,),
                                        microbatch=(1,)),
    "reduced": DesignSpace.reduced,
    "full": DesignSpace,
}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m experiments.optuna_distributed", description=__doc__.split("\n")[0])
    parser.add_argument("--storage", required=True, help="RDB URL shared by the workers (postgresql://…; required)")
    parser.add_argument("--study-name", required=True, help="the study every worker joins (required)")
    parser.add_argument("--workload", default="gpt2-xl", help="built-in workload name, or tiny-gpt2 (default gpt2-xl)")
    parser.add_argument("--sampler", choices=SAMPLERS, default="tpe", help="Optuna sampler (default tpe)")
    parser.add_argument("--seed", type=int, default=0, help="sampler seed; worker i uses seed + i (default 0)")
    parser.add_argument("--trials", type=positive_int, default=100,
                        help="total trials of the study, all workers (default 100)")
    parser.add_argument("--workers", type=positive_int, default=1, help="local worker processes (default 1)")
    parser.add_argument("--space", choices=tuple(SPACES), default="reduced", help="design space (default reduced)")
    add_cluster_size_options(parser, devices=1024, batch=4096)
    return parser


def run_worker(args: argparse.Namespace) -> list[int]:
    """Join the study and run trials until the study has ``--trials`` of them; the trial numbers run here."""
    import optuna
    from optuna.study import MaxTrialsCallback

    from baselines.workloads import resolve_workload

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    objective = make_objective(resolve_workload(args.workload), Cluster(n_devices=args.devices, global_batch=args.batch),
                               space=SPACES[args.space](), multi_objective=args.sampler == "nsga2",
                               encoding="index" if args.sampler in ("gp", "cmaes") else "categorical")
    study = optuna.create_study(storage=args.storage, study_name=args.study_name, directions=objective.directions,
                                load_if_exists=True, sampler=make_sampler(args.sampler, seed=args.seed,
                                                                          multi_objective=args.sampler == "nsga2"))
    mine: list[int] = []
    study.optimize(objective, n_trials=args.trials,
                   callbacks=[lambda s, t: mine.append(t.number), MaxTrialsCallback(args.trials, states=None)])
    return mine


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.storage = storage_url(args.storage)
    except ValueError as error:
        parser.error(str(error))
    if args.workers == 1:
        print(json.dumps({"pid": os.getpid(), "trials": run_worker(args)}), flush=True)
        return 0
    import optuna

    # Create the schema and the study once, before the workers race to (concurrent table creation fails).
    optuna.create_study(storage=args.storage, study_name=args.study_name, load_if_exists=True,
                        directions=["maximize", "minimize"] if args.sampler == "nsga2" else ["maximize"])
    base = [sys.executable, "-m", "experiments.optuna_distributed", "--storage", args.storage, "--study-name",
            args.study_name, "--workload", args.workload, "--sampler", args.sampler, "--trials", str(args.trials),
            "--space", args.space, "--devices", str(args.devices), "--batch", str(args.batch), "--workers", "1"]
    workers = [subprocess.Popen(base + ["--seed", str(args.seed + i)], stdout=subprocess.PIPE, text=True)
               for i in range(args.workers)]
    reports = []
    for worker in workers:
        out, _ = worker.communicate()
        if worker.returncode != 0:
            print(f"error: a worker exited with status {worker.returncode}", file=sys.stderr)
            return 1
        reports.append(json.loads(out.strip().splitlines()[-1]))

    study = optuna.load_study(study_name=args.study_name, storage=args.storage)
    result = {"workers": reports, "trials": len(study.trials)}
    if len(study.directions) == 1:
        best = study.best_trial
        result.update(best_value=best.value, best_design=best.user_attrs.get("design"))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
