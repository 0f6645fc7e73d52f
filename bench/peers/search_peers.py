#!/usr/bin/python3
"""Peers of tunepar's Bayesian search, run on the same truth functions (bench/search_bench.cc).

Reads DIR/truth_<problem>_<truth>_<seed>.csv (every legal layout with its true step time, true
memory, whether it fits, and the truth's noise) and writes DIR/curves_<method>_<problem>_<truth>.csv
(per trial: simple regret after it, the regret of the truly best layout tried so far, ok or oom,
whether the layout was tried before, and 0 for probe: the peers have no memory model to probe
past), for:

  optuna-tpe       Optuna's TPE sampler (python3-optuna 3.1), ask/tell, each knob suggested as a
                   categorical (tp, pp, micro_batch, precision, zero, recompute, seq_parallel,
                   virtual_stages, flash_attention), the objective log step time. A suggestion
                   that is not a legal layout is told PRUNED and costs no trial (it cannot be
                   launched); an OOM is told PRUNED and counts (it was launched). PRUNED rather
                   than FAIL: Optuna's samplers ignore FAILed trials, while TPE (3.1,
                   _get_observation_pairs) ranks a pruned trial without intermediate values
                   below every completed one, so the sampler learns that the region is bad. A
                   suggestion of a layout already tried is run again (TPE re-suggests categorical
                   combinations; a user running study.optimize would launch it): it counts as a
                   trial and as a duplicate.
  sklearn-gp-ei    scikit-learn (python3-sklearn 1.2) GaussianProcessRegressor, Matern-5/2 ARD +
                   white noise, normalize_y, the library's default of no optimizer restart (2
                   restarts, as before, tripled its time: 45 minutes of this benchmark's 25),
                   expected improvement scored on every untried legal layout, 5 random initial
                   layouts, 30 trials (GP_BUDGET below); an OOM is given the worst observed value
                   + 1 (log step time), the usual way to tell a GP a trial failed.
  random           (in search_bench.cc) uniform over the legal layouts, without replacement.

Run with Debian's own interpreter (/usr/bin/python3), where the Debian packages live.
Both peers see the truth's multiplicative noise on every measured step time (noise_sd: 2% on
the model truths, the measured run-to-run spread on the measured one), as tunepar does; none of
them sees the memory column (they have no memory model). So a truth `NAME-nopeak` (the truth
`NAME` whose program prints no peak memory, which only tunepar would notice) gives them the
same runs as `NAME`: its curves are copied from `NAME`'s, not run again.
"""
import csv
import filecmp
import glob
import math
import os
import shutil
import sys
import time
import warnings

import numpy as np

BUDGET = int(os.environ.get("SEARCH_BENCH_BUDGET", "50"))
# The GP peer's refits cost seconds per run (about 7 s for 50 trials, 3 s for 30, one core): it runs
# the first 30 trials, which the fixed-run figures (OOM and duplicates per 30) need, unless told more.
GP_BUDGET = int(os.environ.get("SEARCH_BENCH_GP_BUDGET", str(min(BUDGET, 30))))
KNOBS = ["tp", "pp", "micro_batch", "precision", "zero", "recompute", "seq_parallel", "virtual_stages",
         "flash_attention"]


def load_truth(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append({
                "tp": int(r["tp"]), "pp": int(r["pp"]), "micro_batch": int(r["micro_batch"]),
                "precision": r["precision"], "zero": int(r["zero"]), "recompute": r["recompute"],
                "seq_parallel": int(r["seq_parallel"]), "virtual_stages": int(r["virtual_stages"]),
                "flash_attention": int(r["flash_attention"]), "step": float(r["true_step_s"]),
                "fits": r["fits"] == "1", "noise": float(r["noise_sd"])})
    return rows


class Regret:
    def __init__(self, rows):
        self.rows = rows
        self.opt = min(r["step"] for r in rows if r["fits"])
        self.best_measured = math.inf
        self.incumbent = None
        self.best_tried = None
        self.curve = []
        self.tried_curve = []
        self.status = []
        self.duplicate = []
        self.tried = set()

    def regret_of(self, index):
        return 1.0 if index is None else 1.0 - self.opt / self.rows[index]["step"]

    def record(self, index, ok, measured):
        if ok and measured < self.best_measured:
            self.best_measured = measured
            self.incumbent = index
        if ok and (self.best_tried is None or self.rows[index]["step"] < self.rows[self.best_tried]["step"]):
            self.best_tried = index
        self.curve.append(self.regret_of(self.incumbent))
        self.tried_curve.append(self.regret_of(self.best_tried))
        self.status.append("ok" if ok else "oom")
        self.duplicate.append(1 if index in self.tried else 0)
        self.tried.add(index)


def measure(rng, row):
    """A launched trial: (ok, measured step time)."""
    if not row["fits"]:
        return False, None
    return True, row["step"] * math.exp(row["noise"] * rng.standard_normal())


def run_optuna(rows, seed):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    values = {k: sorted({r[k] for r in rows}, key=str) for k in KNOBS}
    index = {tuple(r[k] for k in KNOBS): i for i, r in enumerate(rows)}
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
    rng = np.random.default_rng(seed * 7 + 1)
    regret = Regret(rows)
    asked = 0
    while len(regret.curve) < BUDGET and asked < 200 * BUDGET:
        asked += 1
        trial = study.ask()
        key = tuple(trial.suggest_categorical(k, values[k]) for k in KNOBS)
        i = index.get(key)
        if i is None:  # not a legal layout: cannot be launched, costs no trial
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        ok, step = measure(rng, rows[i])
        regret.record(i, ok, step)
        if ok:
            study.tell(trial, math.log(step))
        else:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    while len(regret.curve) < BUDGET:  # gave up asking: the curve stays where it is
        regret.curve.append(regret.curve[-1] if regret.curve else 1.0)
        regret.tried_curve.append(regret.tried_curve[-1] if regret.tried_curve else 1.0)
        regret.status.append("ok")
        regret.duplicate.append(0)
    return regret


def encode(rows):
    """The same encoding tunepar uses: log2 ordinals, ordinal recomputation, 0/1, one-hot precision."""
    cols = []
    for k in ["tp", "pp", "micro_batch", "virtual_stages"]:
        v = np.log2([r[k] for r in rows])
        cols.append((v - v.min()) / (v.max() - v.min()) if v.max() > v.min() else v * 0)
    for p in sorted({r["precision"] for r in rows}):
        cols.append(np.array([1.0 if r["precision"] == p else 0.0 for r in rows]))
    rc = {"none": 0.0, "selective": 0.5, "full": 1.0}
    cols.append(np.array([rc[r["recompute"]] for r in rows]))
    for k in ["zero", "seq_parallel", "flash_attention"]:
        cols.append(np.array([float(r[k]) for r in rows]))
    x = np.stack(cols, axis=1)
    keep = x.max(axis=0) > x.min(axis=0)
    return x[:, keep]


def run_sklearn(rows, seed):
    from scipy.stats import norm
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    x = encode(rows)
    rng = np.random.default_rng(seed * 11 + 3)
    regret = Regret(rows)
    tried, ys = [], []
    for i in rng.choice(len(rows), size=5, replace=False):
        ok, step = measure(rng, rows[i])
        regret.record(int(i), ok, step)
        tried.append(int(i))
        ys.append(math.log(step) if ok else None)
    while len(regret.curve) < GP_BUDGET:
        observed = [y for y in ys if y is not None]
        worst = max(observed) + 1.0 if observed else 1.0
        y = np.array([v if v is not None else worst for v in ys])
        kernel = ConstantKernel(1.0) * Matern(length_scale=np.ones(x.shape[1]), nu=2.5) + WhiteKernel(1e-3)
        gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, random_state=seed)
        gp.fit(x[tried], y)
        mask = np.ones(len(rows), dtype=bool)
        mask[tried] = False
        candidates = np.flatnonzero(mask)
        mu, sd = gp.predict(x[candidates], return_std=True)
        best = min(observed) if observed else y.min()
        sd = np.maximum(sd, 1e-12)
        z = (best - mu) / sd
        ei = sd * (z * norm.cdf(z) + norm.pdf(z))
        i = int(candidates[int(np.argmax(ei))])
        ok, step = measure(rng, rows[i])
        regret.record(i, ok, step)
        tried.append(i)
        ys.append(math.log(step) if ok else None)
    return regret


def same_truth(by_case, problem, truth):
    """For NAME-nopeak: NAME, when its truth files are the same, seed for seed (run before it)."""
    if not truth.endswith("-nopeak"):
        return None
    twin = truth[:-len("-nopeak")]
    ours, theirs = sorted(by_case[(problem, truth)]), sorted(by_case.get((problem, twin), []))
    if [s for s, _ in ours] != [s for s, _ in theirs]:
        return None
    same = all(filecmp.cmp(a, b, shallow=False) for (_, a), (_, b) in zip(ours, theirs))
    return twin if same else None


def main():
    directory = sys.argv[1]
    methods = {"optuna-tpe": run_optuna, "sklearn-gp-ei": run_sklearn}
    only = sys.argv[2:]  # optional method names
    truths = sorted(glob.glob(os.path.join(directory, "truth_*.csv")))
    by_case = {}
    for path in truths:
        stem = os.path.basename(path)[len("truth_"):-len(".csv")]
        problem, truth, seed = stem.split("_")
        by_case.setdefault((problem, truth), []).append((int(seed), path))
    for (problem, truth), runs in sorted(by_case.items()):  # NAME before NAME-nopeak
        for method, run in methods.items():
            if only and method not in only:
                continue
            start = time.time()
            curves = os.path.join(directory, f"curves_{method}_{problem}_{truth}.csv")
            twin = same_truth(by_case, problem, truth)
            if twin:
                shutil.copyfile(os.path.join(directory, f"curves_{method}_{problem}_{twin}.csv"), curves)
                print(f"{problem} {truth} {method}: the runs of {twin} (the same truth files)", file=sys.stderr)
                continue
            with open(curves, "w") as out:
                out.write("seed,trial,regret,tried_regret,status,repeat,probe\n")
                for seed, path in sorted(runs):
                    r = run(load_truth(path), seed)
                    for k in range(len(r.curve)):
                        out.write(f"{seed},{k + 1},{r.curve[k]:.9g},{r.tried_curve[k]:.9g},{r.status[k]},"
                                  f"{r.duplicate[k]},0\n")
            print(f"{problem} {truth} {method}: {len(runs)} seeds in {time.time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
