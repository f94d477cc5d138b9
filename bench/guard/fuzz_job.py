#!/usr/bin/python3
"""bench/guard/fuzz_job.py SPEC.json: one bench/torch/fuzz job, run inside a container against its own
/dev/shm (bench/torch mounted at /b). Prints the workload's result (its peak) as one JSON line and
exits 0 when every rank ran to its end. Called by bench/guard/fuzz."""

import json
import sys

sys.path.insert(0, "/b")
import workload  # noqa: E402

with open(sys.argv[1]) as f:
    spec = json.load(f)
res = workload.launch(spec)
print(json.dumps(res), flush=True)
sys.exit(0 if res["ok"] else 1)
