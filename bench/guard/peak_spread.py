#!/usr/bin/python3
"""bench/guard/peak_spread.py: how far a job's /dev/shm peak moves from one run to the next, and what
that costs any plan learned from one run as a multiple of its peak.

From saved bench/guard/fuzz runs (every peak a job showed: its exact and guess runs under the guard, its
runs at the learned plan), for each margin M: the share of ordered pairs of runs (a, b) of one job where
b peaked above M x a's peak (learned from a, b would have crashed at that plan), the jobs where that
happens, and the median over jobs of M x the job's median peak / the smallest size that runs (bench/torch/fuzz's
bisection, where known).

    bench/guard/peak_spread.py bench/guard/fuzz-runs/*.json

With --trace OUT --case SEED [--case ...] --repeat N (root, the PyTorch of the host or of
scripts/torch-rootfs): runs each job N times on a 3 GiB tmpfs in a private mount namespace, keeping every
sample of its /dev/shm (bench/torch/workload.py's spec["trace"], 500 Hz), and prints for each run the
peak against the job's highest, and how often and how long the run came near its own peak: a job whose
peak is a rare spike might be told from one that sits at its peak, from one run.
"""

import argparse
import collections
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MiB = 1 << 20
MARGINS = (1.10, 1.12, 1.15, 1.20, 1.25, 1.30, 1.40, 1.55)


def peaks_of(paths):
    peaks, jobs, smallest = collections.defaultdict(list), {}, {}
    for path in paths:
        with open(path) as f:
            for c in json.load(f)["cases"]:
                s = c["seed"]
                jobs[s] = c["job"]
                if c.get("smallest"):
                    smallest[s] = c["smallest"]
                runs = [c.get("exact") or {}, c.get("guess") or {}] + (c.get("at_learned_guarded") or [])
                peaks[s] += [r["peak_bytes"] for r in runs if r.get("finished") and r.get("peak_bytes")]
                peaks[s] += [r["peak_bytes"] for r in c.get("at_learned") or [] if r.get("ok") and r.get("peak_bytes")]
    return peaks, jobs, smallest


def spread(paths):
    sys.path.insert(0, HERE)
    from fuzz_cases import known_smallest
    peaks, jobs, smallest = peaks_of(paths)
    taught = [s for s in peaks if jobs[s]["loaders"][0]["workers"] > 0 and len(peaks[s]) >= 4]
    for s in taught:
        smallest.setdefault(s, known_smallest(jobs[s]))
    print(f"{len(taught)} jobs whose training loader has workers, with at least 4 peaks each "
          f"({sum(len(peaks[s]) for s in taught)} peaks)\n")
    print("| job | ranks | runs | lowest peak | highest | highest / lowest |")
    print("|---|---|---|---|---|---|")
    for s in sorted(taught, key=lambda s: -max(peaks[s]) / min(peaks[s]))[:8]:
        p = peaks[s]
        print(f"| {s} | {jobs[s]['ranks']} | {len(p)} | {min(p) / MiB:.1f} MiB | {max(p) / MiB:.1f} MiB | "
              f"{max(p) / min(p):.2f} |")
    print("\n| margin over one run's peak | pairs where the other run peaked above it | jobs | "
          "median of margin x median peak / smallest |")
    print("|---|---|---|---|")
    for m in MARGINS:
        pairs = bad = 0
        bad_jobs = set()
        for s in taught:
            p = peaks[s]
            for i, a in enumerate(p):
                for j, b in enumerate(p):
                    if i != j:
                        pairs += 1
                        if b > a * m:
                            bad += 1
                            bad_jobs.add(s)
        ratios = [statistics.median(peaks[s]) * m / smallest[s] for s in taught if smallest.get(s)]
        print(f"| {m:.2f}x | {bad} of {pairs} ({100 * bad / pairs:.1f}%) | {len(bad_jobs)} | "
              f"{statistics.median(ratios):.3f}x over {len(ratios)} |")


def excursions(trace, level):
    n, above = 0, False
    for _, used in trace:
        if used >= level and not above:
            n, above = n + 1, True
        elif used < level * 0.9:
            above = False
    return n


def trace(out, cases, repeat):
    sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
    sys.path.insert(0, HERE)
    import workload
    from fuzz_cases import load_fuzz
    fuzz = load_fuzz()
    runs = []
    for seed in cases:
        spec = dict(fuzz.run_spec(fuzz.draw(seed), timeout=300), trace=True)
        for _ in range(repeat):
            res = workload.measure(spec, 3 << 30)
            runs.append({"seed": seed, "ok": res["ok"], "peak": res.get("peak_shm_bytes"), "trace": res.get("trace")})
            with open(out, "w") as f:
                json.dump(runs, f)
    by_seed = collections.defaultdict(list)
    for r in runs:
        if r["ok"] and r["peak"]:
            by_seed[r["seed"]].append(r)
    print("| job | peak | job's highest / this peak | time at 90% of the peak or more | "
          "times it came within 5% of the peak | within 10% |")
    print("|---|---|---|---|---|---|")
    for seed, rs in by_seed.items():
        top = max(r["peak"] for r in rs)
        for r in rs:
            p, t = r["peak"], r["trace"]
            near = sum(1 for _, u in t if u >= 0.9 * p) / len(t)
            print(f"| {seed} | {p / MiB:.1f} MiB | {top / p:.3f} | {100 * near:.1f}% | {excursions(t, 0.95 * p)} | "
                  f"{excursions(t, 0.9 * p)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", help="bench/guard/fuzz --json files")
    ap.add_argument("--trace", help="run --case jobs with every sample kept, into this JSON")
    ap.add_argument("--case", type=int, action="append", default=[])
    ap.add_argument("--repeat", type=int, default=4)
    a = ap.parse_args()
    if a.trace:
        return trace(a.trace, a.case, a.repeat)
    return spread(a.runs or sorted(glob.glob(os.path.join(HERE, "fuzz-runs", "*.json"))))


if __name__ == "__main__":
    main()
