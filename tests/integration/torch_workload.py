#!/usr/bin/python3
"""A small real PyTorch DataLoader job for gpu-run's integration tests.

    /usr/bin/python3 torch_workload.py --batch 96 --workers 2 --shape 3x224x224 --batches 10

Each sample is a float32 tensor of SHAPE (written in full, as a decode/augment step does) and
an int64 label; workers collate batches into /dev/shm. The consumer is slower than loading
(--delay seconds per batch), so the prefetch queues fill to PyTorch's limit. --work-ms makes
each sample cost CPU time, so that more workers finish sooner (for `gpu-run-ctl tune`).
--workers defaults to $GPU_RUN_NUM_WORKERS. Exits 0 after consuming every batch; on failure
prints PyTorch's message on stderr and exits 1.

--nccl-segments BYTES,... first makes /dev/shm segments the way NCCL's SHM transport does
(src/misc/shmutils.cc: mkstemp /dev/shm/nccl-XXXXXX, posix_fallocate to the whole size, mmap,
unlink once the peer has it), held mapped for the whole run (the workers inherit them). There is
no GPU or NCCL on the test machines: this lets `gpu-run-ctl calibrate` be tested on the segments
it must tell apart from the DataLoader's.
"""

import argparse
import mmap
import os
import tempfile
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Synthetic(Dataset):
    def __init__(self, shape, length, work_ms):
        self.shape = shape
        self.length = length
        self.work_s = work_ms / 1000.0

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        end = time.monotonic() + self.work_s
        while time.monotonic() < end:
            pass
        return torch.zeros(self.shape, dtype=torch.float32), i


def nccl_like_segments(sizes):
    maps = []
    for size in sizes:
        fd, path = tempfile.mkstemp(prefix="nccl-", dir="/dev/shm")
        os.posix_fallocate(fd, 0, size)
        maps.append(mmap.mmap(fd, size))
        os.close(fd)
        os.unlink(path)
    return maps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--workers", type=int, default=int(os.environ.get("GPU_RUN_NUM_WORKERS", "0")))
    ap.add_argument("--shape", default="3x224x224", help="per sample, e.g. 3x224x224")
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--delay", type=float, default=0.2, help="consumer seconds per batch")
    ap.add_argument("--work-ms", type=float, default=0.0, help="CPU milliseconds per sample")
    ap.add_argument("--nccl-segments", default="", help="byte sizes of NCCL-like segments, e.g. 9637888,4096")
    a = ap.parse_args()
    segments = nccl_like_segments(int(n) for n in a.nccl_segments.split(",") if n)  # noqa: F841 (kept mapped)
    shape = tuple(int(d) for d in a.shape.split("x"))
    loader = DataLoader(
        Synthetic(shape, a.batch * a.batches, a.work_ms), batch_size=a.batch, num_workers=a.workers,
        prefetch_factor=a.prefetch if a.workers > 0 else 2, drop_last=True)
    t0 = time.monotonic()
    got = 0
    try:
        for images, labels in loader:
            got += 1
            time.sleep(a.delay)
    except Exception as e:  # PyTorch's own message, e.g. "DataLoader worker (pid(s) ...) exited unexpectedly"
        print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1
    print(f"torch_workload: {got} batches of {a.batch}x{a.shape} with {a.workers} workers in "
          f"{time.monotonic() - t0:.2f}s", flush=True)
    return 0 if got == a.batches else 1


if __name__ == "__main__":
    sys.exit(main())
