#!/usr/bin/python3
"""bench/guard/torch_cases.py: bench/torch cases started at Docker's 64 MiB under gpu-run --guard.

For each case (single-rank cases of bench/torch that die at 64 MiB in its last run), runs
bench/torch/workload.py in the PyTorch image through `gpu-run --guard --shm-size 64m` against the
engine in DOCKER_HOST, and reports whether it finished, the size the guard grew /dev/shm to (its
last "-> SIZE" line), and that size over the smallest size the case ran at in bench/torch's last
run (bench/torch/last-run.json, measured in a private mount namespace, not in a container).
Prints one JSON object on stdout. Called by bench/guard/run.

    torch_cases.py [--plan] GPU_RUN IMAGE [LABEL ...]
    torch_cases.py --table FILE.json      # the Markdown rows of a run's cases

--plan also gives gpu-run the case's profile (bench/torch's variant stating its pin_memory), GPUs (as bench/torch plans it: one per rank unless
the case pins without a GPU), workers, batch size and prefetch factor (the /dev/shm size stays
64 MiB, --gpu-request none): the guard then keeps the plan's headroom, one batch per worker,
free, and stops near the plan's need. Without it gpu-run plans with the built-in default profile
(2 workers x 32 images), a guess: the guard keeps that plan's headroom and is not bounded by it.
"""

import importlib.machinery
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH = os.path.join(os.path.dirname(HERE), "torch")
MiB = 1 << 20

# Short cases that fail at 64 MiB (bench/torch/last-run.json), from 65 to 345 MiB.
DEFAULT = ["medical r1 w2 b1 f2 pin", "default r1 w2 b32 f2 pin", "imagenet r1 w1 b128 f2 pin",
           "imagenet r1 w2 b32 f4 nopin", "video r1 w2 b8 f4 nopin", "imagenet r1 w4 b64 f2 nopin"]


def size_of(text):
    m = re.fullmatch(r"([0-9.]+)(B|KiB|MiB|GiB)", text)
    return float(m.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": MiB, "GiB": 1 << 30}[m.group(2)]


def table(path):
    with open(path) as f:
        for c in json.load(f)["cases"]:
            print(f"| {c['label']} | exit {c['exit']} | {c['growths']} | {c['final_bytes'] / MiB:.0f} MiB | "
                  f"{c['smallest_bytes'] / MiB:.0f} MiB | {c['ratio']}x |")


def main():
    if sys.argv[1] == "--table":
        return table(sys.argv[2])
    args = sys.argv[1:]
    plan = args[0] == "--plan"
    if plan:
        args = args[1:]
    gpu_run, image, labels = args[0], args[1], args[2:] or DEFAULT
    loader = importlib.machinery.SourceFileLoader("torch_bench", os.path.join(TORCH, "run"))
    spec = importlib.util.spec_from_loader("torch_bench", loader)
    tb = importlib.util.module_from_spec(spec)
    loader.exec_module(tb)
    with open(os.path.join(TORCH, "last-run.json")) as f:
        smallest = {r["label"]: r["smallest"] for r in json.load(f)["results"]}
    cases = {tb.Case(*c).label: tb.Case(*c) for c in tb.FULL_CASES}
    planner = tb.Planner(gpu_run)
    out = []
    for label in labels:
        c = cases[label]
        fields = [f"{'x'.join(str(d) for d in f['shape'])}:{f['dtype']}" if f["shape"] else f":{f['dtype']}"
                  for f in tb.load_profile(c.profile)["fields"]]
        # Planned as bench/torch plans the case: a pinned case has a GPU (no hold), a "cpu" one none.
        gpus = 0 if c.pin == "cpu" else c.ranks
        sizing = ["--profile", planner.profile_for(c.profile, c.pin), "--gpus", str(gpus), "--workers", str(c.workers), "--batch-size",
                  str(c.batch), "--prefetch-factor", str(c.prefetch)] if plan else []
        argv = [gpu_run, "--guard", *sizing, "--shm-size", "64m", "--gpu-request", "none", "--rm",
                "-v", f"{TORCH}:/b:ro", image, "/usr/bin/python3", "/b/workload.py",
                "--batch-size", str(c.batch), "--workers", str(c.workers), "--prefetch-factor", str(c.prefetch),
                "--ranks", "1", "--pin-mode", "off" if c.pin == "cpu" else "sim", "--timeout", "180"]
        for f in fields:
            argv += ["--field", f]
        if c.pin:
            argv.append("--pin-memory")
        r = subprocess.run(argv, capture_output=True, text=True)
        grown = re.findall(r"gpu-run: --guard: /dev/shm \S+ -> (\S+) ", r.stderr)
        final = size_of(grown[-1]) if grown else 64 * MiB
        out.append({"label": label, "exit": r.returncode, "finished": r.returncode == 0, "growths": len(grown),
                    "final_bytes": int(final), "smallest_bytes": smallest[label],
                    "ratio": round(final / smallest[label], 2),
                    "stderr_tail": r.stderr.strip().splitlines()[-3:] if r.returncode else []})
        print(f"  {label}: exit {r.returncode}, {len(grown)} growths, final {final / MiB:.0f} MiB, "
              f"smallest {smallest[label] / MiB:.0f} MiB: {final / smallest[label]:.2f}x", file=sys.stderr, flush=True)
    # The size a failed case reached says nothing about how close the guard ends: finished ones only.
    ratios = [o["ratio"] for o in out if o["finished"]] or [0]
    print(json.dumps({"cases": out, "finished": sum(o["finished"] for o in out), "total": len(out),
                      "median_ratio": round(statistics.median(ratios), 3), "max_ratio": max(ratios)}))


if __name__ == "__main__":
    main()
