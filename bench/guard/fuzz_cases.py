#!/usr/bin/python3
"""bench/guard/fuzz_cases.py: jobs drawn by bench/torch/fuzz started at Docker's 64 MiB under gpu-run --guard.

Called by bench/guard/fuzz (which starts a private dockerd and imports the PyTorch image); DOCKER_HOST
names that dockerd. For each drawn job (bench/torch/fuzz's draw(seed), the seeds SEED * 1000000 + k):

  exact   gpu-run --guard with the job's exact profile (bench/torch/fuzz's profile_of: every loader as it
          is, with the loop's order) and --gpus RANKS, from --shm-size 64m;
  guess   gpu-run --guard --record with `guess`, the built-in default (its 224x224 image guess of the
          samples) with fuzz's two bench conditions (min_shm 1m, NCCL's transport p2p: bench/torch/fuzz
          says why), told only what a user knows without describing the data: --gpus RANKS and the
          training loader's --workers, --batch-size and --prefetch-factor; from --shm-size 64m.

Each run's exit, the guard's growths (its "/dev/shm A -> B" lines), the size it ended at and the job's own
peak (the workload's result) are kept. With --learn, the guess run's line in the performance log is then
learned (gpu-run-ctl profiles learn guess) and the job run --repeat times (default 3) at the learned plan
(gpu-run --json with the same flags), in a private mount namespace as bench/torch/fuzz runs a job at a
plan: crashes, and the plan over the smallest size that runs, when bench/torch/fuzz-runs has it for the
same job (seed 2, cases 0-29: measured by bisection there).

With --guarded-repeat N as well, the job is also run N times from the learned plan under --guard (as it runs
where gpu-run is installed, the guard on): whether each reaches its end, and the guard's growths.

    fuzz_cases.py --cases 30 --seed 2 [--first 0] [--learn [--guarded-repeat 3]] --json OUT.json
    fuzz_cases.py --report OUT.json [...]      # the Markdown of saved runs
"""

import argparse
import functools
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH = os.path.join(ROOT, "bench", "torch")
sys.path.insert(0, TORCH)
MiB = 1 << 20

# The guess is the built-in `default` overridden in the case's directory under its own name (a
# profile may extend its own name), so the guard takes it as a guess, as it takes a user's
# `--profile default`: it keeps the headroom without the plan's bound (growth_limits.cpp). Before
# 2026-12-06 22:00 it was named `guess`, and the guard bounded it by the guessed need.
GUESS_NAME = "default"
GUESS = {"name": GUESS_NAME, "extends": "default", "min_shm": "1m", "nccl": {"transport": "p2p"},
         "description": "The built-in default with bench/torch/fuzz's bench conditions (min_shm 1m, NCCL p2p)"}


def load_fuzz():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("fuzz", os.path.join(TORCH, "fuzz"))
    spec = importlib.util.spec_from_loader("fuzz", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def size_of(text):
    m = re.fullmatch(r"([0-9.]+)(B|KiB|MiB|GiB)", text)
    return int(float(m.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": MiB, "GiB": 1 << 30}[m.group(2)])


@functools.lru_cache(maxsize=1)
def saved_smallest():
    """Every case of bench/torch/fuzz-runs with a smallest size, read once: (seed, job, smallest)."""
    out = []
    for path in sorted(glob.glob(os.path.join(TORCH, "fuzz-runs", "*.json"))):
        with open(path) as f:
            out += [(c["seed"], c["job"], c["smallest"]) for c in json.load(f)["results"] if c.get("smallest")]
    return out


def known_smallest(job):
    """The smallest size bench/torch/fuzz found for this very job, if a saved run has it."""
    return next((smallest for seed, j, smallest in saved_smallest() if seed == job["seed"] and j == job), None)


def guarded(gpu_run, image, sizing, spec_dir, seed, env, record=False, start=("--shm-size", "64m"), start_bytes=64 * MiB):
    """One run under gpu-run --guard; `start_bytes` is the size `start` (or the plan) gives it."""
    argv = [gpu_run, "--guard", *(["--record"] if record else []), *sizing, *start,
            "--gpu-request", "none", "--rm", "-v", f"{TORCH}:/b:ro", "-v", f"{HERE}:/g:ro", "-v", f"{spec_dir}:/s:ro",
            image, "/usr/bin/python3", "/g/fuzz_job.py", f"/s/{seed}.json"]
    t = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    grown = re.findall(r"gpu-run: --guard: /dev/shm \S+ -> (\S+) ", r.stderr)
    res = {}
    for line in reversed(r.stdout.strip().splitlines()):
        try:
            res = json.loads(line)
            break
        except ValueError:
            continue
    peak = res.get("peak_shm_bytes")
    m = re.search(r"gpu-run: --guard: peak /dev/shm (\S+) of (\S+)", r.stderr)
    final = size_of(grown[-1]) if grown else start_bytes
    out = {"exit": r.returncode, "finished": r.returncode == 0, "growths": len(grown), "final_bytes": final,
           "peak_bytes": peak, "guard_peak_bytes": size_of(m.group(1)) if m else None,
           "final_over_peak": round(final / peak, 3) if peak else None, "elapsed": round(time.monotonic() - t, 1)}
    if r.returncode:
        out["stderr_tail"] = r.stderr.strip().splitlines()[-4:]
    return out


def run_case(fuzz, wl, seed, a, work):
    job = fuzz.draw(seed)
    case_dir = tempfile.mkdtemp(prefix=f"case-{seed}-", dir=work)
    spec = fuzz.run_spec(job, timeout=300)
    with open(os.path.join(case_dir, f"{seed}.json"), "w") as f:
        json.dump(spec, f)
    exact = fuzz.profile_of(job, f"fuzz-{seed}")
    with open(os.path.join(case_dir, f"fuzz-{seed}.json"), "w") as f:
        json.dump(exact, f, indent=1)
    with open(os.path.join(case_dir, GUESS_NAME + ".json"), "w") as f:
        json.dump(GUESS, f, indent=1)
    perf = os.path.join(case_dir, "perf.jsonl")
    config = os.path.join(case_dir, "config.json")
    with open(config, "w") as f:
        json.dump({"perf_log": perf, "log_file": os.path.join(case_dir, "gpu-run.log")}, f)
    env = dict(os.environ, GPU_RUN_CONFIG=config)
    ranks = str(job["ranks"])
    t = job["loaders"][0]
    user = ["--gpus", ranks, "--workers", str(t["workers"]), "--batch-size", str(t["batch_size"]),
            "--prefetch-factor", str(t["prefetch_factor"])]
    out = {"seed": seed, "describe": fuzz.describe(job), "job": job}
    out["exact"] = guarded(a.gpu_run, a.image, ["--profile-dir", case_dir, "--profile", f"fuzz-{seed}", "--gpus", ranks],
                           case_dir, seed, env)
    out["guess"] = guarded(a.gpu_run, a.image, ["--profile-dir", case_dir, "--profile", GUESS_NAME, *user], case_dir, seed,
                           env, record=True)
    # What the guess run's line in the performance log holds for learn: its peak and its burst.
    for line in open(perf).read().splitlines() if os.path.exists(perf) else []:
        rec = json.loads(line)
        if rec.get("profile") == GUESS_NAME and rec.get("source") == "gpu-run --record":
            out["guess"]["record_peak_bytes"] = rec.get("peak_shm")
            out["guess"]["record_burst_bytes"] = rec.get("burst_shm")
    log(f"  {seed}: exact: exit {out['exact']['exit']}, {out['exact']['growths']} growths, "
        f"final/peak {out['exact']['final_over_peak']}; guess: exit {out['guess']['exit']}, "
        f"{out['guess']['growths']} growths, final/peak {out['guess']['final_over_peak']}")
    if not a.learn:
        return out
    learn = subprocess.run([a.ctl, "profiles", "learn", GUESS_NAME, "--profile-dir", case_dir, "--log", perf],
                           capture_output=True, text=True, env=env)
    out["learn"] = {"exit": learn.returncode, "output": (learn.stdout + learn.stderr).strip().splitlines()[-6:]}
    if learn.returncode != 0:
        log(f"  {seed}: learn: exit {learn.returncode}: {out['learn']['output'][-1:]}")
        return out
    def plan_of(*guard):
        plan = subprocess.run([a.gpu_run, "--profile-dir", case_dir, "--profile", GUESS_NAME, *user, "--gpu-request",
                               "none", *guard, "--json", "bench-image"], capture_output=True, text=True, env=env)
        return json.loads(plan.stdout)["plan"]["shm_bytes"]

    # The learned plan a guarded run starts at (--guard, or the node guard on the host), and the one a
    # door gives where no guard runs (the wide headroom: sizing.hpp, kUnguardedLearnedHeadroom).
    learned = plan_of("--guard")
    unguarded = plan_of()
    out["learned_plan"] = learned
    out["learned_plan_unguarded"] = unguarded
    runs = []
    for _ in range(a.repeat):
        res = wl.measure(spec, fuzz.page_up(unguarded))
        runs.append({"ok": res["ok"], "hung": res.get("hung", False), "peak_bytes": res.get("peak_shm_bytes"),
                     "error": None if res["ok"] else fuzz.short_error(res)})
    out["at_learned"] = runs
    out["crashes"] = sum(not r["ok"] and not r["hung"] for r in runs)
    if a.guarded_repeat:
        # As installed (the guard on wherever gpu-run is): the learned plan as the start, under --guard.
        out["at_learned_guarded"] = [
            guarded(a.gpu_run, a.image, ["--profile-dir", case_dir, "--profile", GUESS_NAME, *user], case_dir, seed, env,
                    start=(), start_bytes=learned) for _ in range(a.guarded_repeat)]
    out["smallest"] = known_smallest(job)
    out["plan_over_smallest"] = round(learned / out["smallest"], 3) if out["smallest"] else None
    out["unguarded_over_smallest"] = round(unguarded / out["smallest"], 3) if out["smallest"] else None
    g = out.get("at_learned_guarded", [])
    log(f"  {seed}: learned plan {learned / MiB:.1f} MiB, {unguarded / MiB:.1f} MiB without a guard: "
        f"{len(runs) - out['crashes']} of {len(runs)} ran at the latter"
        + (f", plan/smallest {out['plan_over_smallest']}" if out["smallest"] else "")
        + (f"; guarded from it: {sum(r['finished'] for r in g)} of {len(g)} ran, growths "
           f"{[r['growths'] for r in g]}" if g else ""))
    return out


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def median(xs):
    return round(statistics.median(xs), 3) if xs else None


def learn_why(c):
    """Why a job has no learned plan: the guess run's line learn did not use, in its words."""
    out = c.get("learn", {}).get("output") or []
    for line in out:
        if "not used (" in line:
            return "not learned: " + line.split("not used (", 1)[1].split(":")[0].split(",")[0]
    return "-"


def report(paths):
    cases = []
    for p in paths:
        with open(p) as f:
            cases += json.load(f)["cases"]
    lines = []
    for mode in ("exact", "guess"):
        rows = [c[mode] for c in cases if mode in c]
        fin = [r for r in rows if r["finished"]]
        ratios = [r["final_over_peak"] for r in fin if r["final_over_peak"]]
        growths = [r["growths"] for r in rows]
        lines.append(f"| {mode} | {len(fin)} of {len(rows)} | {median(growths)} (max {max(growths) if growths else '-'}) | "
                     f"{median(ratios)}x (max {max(ratios) if ratios else '-'}x) |")
    learned = [c for c in cases if "at_learned" in c]
    for c in learned:  # a smallest found by bench/torch/fuzz after the run was saved
        if not c.get("smallest") and (found := known_smallest(c["job"])):
            c["smallest"], c["plan_over_smallest"] = found, round(c["learned_plan"] / found, 3)
    crashes = sum(c["crashes"] for c in learned)
    runs = sum(len(c["at_learned"]) for c in learned)
    pos = [c["plan_over_smallest"] for c in learned if c.get("plan_over_smallest")]
    print("| profile | ran to the end | growths: median | final size / the job's peak: median |")
    print("|---|---|---|---|")
    print("\n".join(lines))
    print()
    if any("learn" in c for c in cases):
        # Runs saved before the unguarded plan (learned_plan_unguarded) ran bare at the learned plan.
        bare = "the plan without a guard" if any("learned_plan_unguarded" in c for c in learned) else "the learned plan"
        ung = [c["unguarded_over_smallest"] for c in learned if c.get("unguarded_over_smallest")]
        if ung:
            print(f"without a guard: {runs} runs at the learned plan's unguarded size, {crashes} crashes; that size / "
                  f"smallest that runs: median {median(ung)}x (max {max(ung)}x)")
        tight = " (the plan under a guard)" if ung else ""
        print(f"learned: {len(learned)} jobs, {runs} runs at {bare}, {crashes} crashes; plan{tight} / smallest that "
              f"runs: median {median(pos)}x over {len(pos)} jobs with a known smallest (max {max(pos) if pos else '-'}x); "
              f"plan / the taught run's recorded peak: median "
              f"{median([c['learned_plan'] / c['guess']['record_peak_bytes'] for c in learned if c['guess'].get('record_peak_bytes')])}x; "
              f"learn refused or failed for {sum(1 for c in cases if c.get('learn', {}).get('exit'))} jobs")
        g = [r for c in learned for r in c.get("at_learned_guarded", [])]
        if g:
            # A run that did not grow ended at the learned plan (runs saved before start_bytes: at 64 MiB).
            final = [max(r["final_bytes"], c["learned_plan"]) / c["smallest"] for c in learned if c.get("smallest")
                     for r in c.get("at_learned_guarded", []) if r["finished"]]
            print(f"learned, under --guard from the learned plan: {sum(r['finished'] for r in g)} of {len(g)} runs reached "
                  f"their end; growths: median {median([r['growths'] for r in g])} (max {max(r['growths'] for r in g)}), "
                  f"{sum(1 for r in g if r['growths'])} runs grew; final size / smallest that runs: median "
                  f"{median(final)}x (max {round(max(final), 3) if final else '-'}x)")
    else:
        print("learned: not asked (run without --learn)")
    print()
    print("| seed | job | exact: exit, growths, final/peak | guess: exit, growths, final/peak | learned plan | runs at it | plan / smallest |")
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        e, g = c["exact"], c["guess"]
        at = c.get("at_learned")
        print(f"| {c['seed']} | {c['describe'].replace(' | ', '; ')[:100]} | {e['exit']}, {e['growths']}, {e['final_over_peak']} | "
              f"{g['exit']}, {g['growths']}, {g['final_over_peak']} | "
              f"{(str(round(c['learned_plan'] / MiB, 1)) + ' MiB') if c.get('learned_plan') else '-'} | "
              f"{(str(sum(r['ok'] for r in at)) + ' of ' + str(len(at)) + ' ran') if at else '-'} | "
              f"{c.get('plan_over_smallest') or learn_why(c)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=0)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--learn", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--guarded-repeat", type=int, default=0,
                    help="with --learn: also run the job this many times from the learned plan under --guard")
    ap.add_argument("--json")
    ap.add_argument("--report", nargs="+")
    ap.add_argument("--gpu-run", default=os.path.join(ROOT, "build", "release", "bin", "gpu-run"))
    ap.add_argument("--ctl", default=os.path.join(ROOT, "build", "release", "bin", "gpu-run-ctl"))
    ap.add_argument("--image", default="gpurun-torch")
    a = ap.parse_args()
    if a.report:
        return report(a.report)
    fuzz = load_fuzz()
    import workload as wl
    work = tempfile.mkdtemp(prefix="gpu-run-guard-fuzz-")
    cases = []
    for k in range(a.first, a.first + a.cases):
        seed = a.seed * 1000000 + k
        cases.append(run_case(fuzz, wl, seed, a, work))
        if a.json:  # after each case: a run stopped early keeps what it did
            with open(a.json, "w") as f:
                json.dump({"command": " ".join(sys.argv), "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
