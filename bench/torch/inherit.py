#!/usr/bin/python3
"""bench/torch/inherit.py: a DataLoader's workers keep the batches the training process held when
they were started.

Workers are forked (multiprocessing's default on Linux). A forked child inherits the parent's
MAP_SHARED mappings and open descriptors, and torch 1.13 maps a received batch with MAP_SHARED and
keeps its fd (MapAllocator, ALLOCATOR_MAPPED_KEEPFD); nothing unmaps them in the child, whose copy
of the parent's stack still references the tensors. So a batch the loop variable holds when new
workers start stays in /dev/shm while those workers live, after the loop has let it go.

Three measurements, in a private /dev/shm of 1 GiB (needs root), 1 MiB samples, batch 4 (4 MiB):
  1. a held batch, then a new iterator (1 worker, prefetch 1) and the batch dropped: still counted
     until the iterator's worker exits;
  2. an epoch loop without persistent_workers (2 workers, prefetch 2: P*W = 4): the peak of each
     epoch in batches, the first epoch's against the later ones' (the previous epoch's last batch,
     still bound to the loop variable, is kept by the new workers);
  3. the same with persistent_workers=True (workers forked once, before the loop holds anything);
  4. a training loader (4 workers, prefetch 1, persistent, 1 MiB batches, worker 0 slow so the others'
     batches arrive first and wait in the iterator's `_task_info`) and a validation loader whose
     persistent workers start mid-epoch: /dev/shm before, and long after, in MiB.

    sudo /usr/bin/python3 bench/torch/inherit.py
"""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.utils.data as tud  # noqa: E402

import workload as wl  # noqa: E402

MiB = 1 << 20
BATCH = 4


class Samples(tud.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.zeros(MiB, dtype=torch.uint8)


def used():
    return wl.shm_used()


class Peak:
    def __init__(self):
        self.base = used()
        self.peak = 0
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, used() - self.base)
            time.sleep(0.0005)

    def take(self):
        p, self.peak = self.peak, 0
        return p / (BATCH * MiB)


def held_batch():
    dl = tud.DataLoader(Samples(64), batch_size=BATCH, num_workers=1, prefetch_factor=1)
    base = used()
    it = iter(dl)
    batch = next(it)
    del it
    time.sleep(0.5)
    held = (used() - base) / (BATCH * MiB)
    it2 = iter(dl)  # a new worker, forked while `batch` is held
    time.sleep(1.0)
    del batch
    time.sleep(0.5)
    after_drop = (used() - base) / (BATCH * MiB)
    del it2
    time.sleep(1.0)
    after_exit = (used() - base) / (BATCH * MiB)
    print(f"1. held: {held:.2f} batches; new iterator (1 prefetched) and the held batch dropped: "
          f"{after_drop:.2f}; after its worker exits: {after_exit:.2f}")


def epochs(persistent):
    dl = tud.DataLoader(Samples(80), batch_size=BATCH, num_workers=2, prefetch_factor=2,
                        persistent_workers=persistent)
    peak = Peak()
    peaks = []
    for epoch in range(4):
        it = iter(dl)
        wl.wait_until_full(it, 30)
        for batch in it:  # the loop variable keeps the epoch's last batch after the loop
            time.sleep(0.02)
            wl.wait_until_full(it, 30)
        it = None
        peaks.append(peak.take())
    peak.stop = True
    return peaks


class SlowFirstWorker(tud.Dataset):
    def __len__(self):
        return 400

    def __getitem__(self, i):
        if i % 4 == 0:
            time.sleep(0.3)
        return torch.zeros(MiB, dtype=torch.uint8)


class Tiny(tud.Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return torch.zeros(16, dtype=torch.uint8)


def stashed_batches():
    train = tud.DataLoader(SlowFirstWorker(), batch_size=1, num_workers=4, prefetch_factor=1, persistent_workers=True)
    val = tud.DataLoader(Tiny(), batch_size=1, num_workers=1, prefetch_factor=1, persistent_workers=True)
    base = used()
    it = iter(train)
    before = stash = 0
    for k, batch in enumerate(it):
        if k == 3:
            time.sleep(0.8)
            before = (used() - base) / MiB
        if k == 4:
            time.sleep(0.5)  # the next batches arrive while the loop waits for the slow worker's
            stash = sum(1 for v in it._task_info.values() if len(v) == 2)
            vit = iter(val)  # persistent workers, forked now
            next(vit)
            vit = None
        if k == 40:
            time.sleep(0.8)
            after = (used() - base) / MiB
            break
    it = None
    print(f"4. before the validation workers start: {before:.1f} MiB; {stash} batches received out of order "
          f"wait in the iterator when they start; 36 steps later: {after:.1f} MiB")


def main():
    if os.geteuid() != 0:
        sys.exit("bench/torch/inherit.py: needs root (a private /dev/shm)")
    wl.enter_shm_namespace(1 << 30)
    held_batch()
    p = epochs(False)
    print("2. no persistent_workers, P*W = 4: peak per epoch " + ", ".join(f"{x:.2f}" for x in p) +
          " batches (the model: P*W + 2 = 6 in the first epoch, P*W + 3 = 7 after)")
    p = epochs(True)
    print("3. persistent_workers, P*W = 4: peak per epoch " + ", ".join(f"{x:.2f}" for x in p) +
          " batches (the model: P*W + 2 = 6)")
    stashed_batches()


if __name__ == "__main__":
    main()
