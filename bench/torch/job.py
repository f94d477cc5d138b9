"""A training job drawn by bench/torch/fuzz: real PyTorch DataLoaders (train, and optionally validation
and test) over samples of several shapes, driven by a loop of a given shape, one process per rank.

workload.py runs one loader per rank in one pass; this module runs what a training script does over
epochs, so that what Python keeps alive between passes is in /dev/shm as it is in a user's job:
- the training loop's variable still holds the epoch's last batch when the next epoch's iterator
  starts its workers (unless the epoch runs in a function, as torchvision's references do), and a
  loop may keep the previous batch for logging;
- validation mid-epoch (every k steps) or at the epoch's end, a full pass or broken off early
  (Lightning's limit_val_batches, or a `break`), written inline (its loop variable survives the pass)
  or in a function; a test pass after training;
- every pass calls iter() anew: fresh workers, or persistent workers' _reset.
Samples: fixed tensors (images, volumes, boxes), dict samples with many small fields, int64 token
sequences of variable length padded per batch, detection samples collated as lists (torchvision's
detection references: `collate_fn=lambda b: tuple(zip(*b))`), images of variable size padded per
batch, and torchvision's FakeData through real transforms.

The consumer is GPU-bound, as in workload.py: after iter() and after every step it waits until the
iterator's queues are full (workload.fill), and a pin thread falls a whole prefetch behind.

The job is a JSON-able dict (bench/torch/fuzz draws it from a seed); workload.launch runs it when
spec["job"] is set, and workload.measure in a private mount namespace with a tmpfs of a given size.
"""

import os
import random
import sys
import threading
import time

import torch
import torch.utils.data as tud

import workload as wl


def _rng(seed, index):
    return random.Random(seed * 1_000_003 + index)


class Samples(tud.Dataset):
    """`length` samples of one kind (the job's "sample" dict). Every tensor is written in full (torch.zeros
    or the transform's output), as a real decode/augment pipeline writes it; variable sizes are drawn
    per index from the sample's seed, never above the declared largest."""

    def __init__(self, sample, length, seed):
        self.s = sample
        self.length = length
        self.seed = seed
        self.fake = None
        if sample["kind"] == "fakedata":
            import torchvision
            from torchvision import transforms as T
            c, h, w = sample["image_size"]
            tf = T.Compose([T.RandomResizedCrop(sample["crop"]), T.RandomHorizontalFlip(), T.ToTensor(),
                            T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
            self.fake = torchvision.datasets.FakeData(size=length, image_size=(c, h, w), num_classes=1000,
                                                      transform=tf, random_offset=seed)

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        s, kind = self.s, self.s["kind"]
        if kind == "tensors":
            return tuple(torch.zeros(shape, dtype=wl.DTYPES[dt]) for shape, dt in s["fields"])
        if kind == "dict":
            return {name: torch.zeros(shape, dtype=wl.DTYPES[dt]) for name, shape, dt in s["fields"]}
        r = _rng(self.seed, i)
        if kind == "tokens":
            n = r.randint(s["min_len"], s["max_len"])
            return {"input_ids": torch.ones(n, dtype=torch.int64), "labels": torch.ones(n, dtype=torch.int64)}
        if kind == "detection":
            c, hmax, wmax = s["image"]
            h, w = r.randint(hmax // 2, hmax), r.randint(wmax // 2, wmax)
            n = r.randint(1, s["max_boxes"])
            return (torch.zeros((c, h, w), dtype=torch.float32),
                    {"boxes": torch.zeros((n, 4), dtype=torch.float32), "labels": torch.ones(n, dtype=torch.int64)})
        if kind == "varimage":
            c, hmax, wmax = s["max"]
            h, w = r.randint(hmax // 2, hmax), r.randint(wmax // 2, wmax)
            return torch.zeros((c, h, w), dtype=torch.float32), r.randrange(1000)
        if kind == "fakedata":
            return self.fake[i]
        raise ValueError(f"unknown sample kind {kind}")


def list_collate(batch):
    """torchvision's detection references (references/detection/utils.py collate_fn): the batch as
    tuples of the samples' own tensors; each is moved to shared memory on its own when a worker sends it."""
    return tuple(zip(*batch))


def pad_tokens(batch):
    """Token sequences padded to the batch's longest (a Hugging Face-style collator)."""
    from torch.nn.utils.rnn import pad_sequence
    return {k: pad_sequence([b[k] for b in batch], batch_first=True) for k in batch[0]}


def pad_images(batch):
    """Images of different sizes in one zero-padded tensor of the batch's largest (detectron2's ImageList)."""
    c = batch[0][0].shape[0]
    h = max(b[0].shape[1] for b in batch)
    w = max(b[0].shape[2] for b in batch)
    out = torch.zeros((len(batch), c, h, w), dtype=batch[0][0].dtype)
    for k, (img, _) in enumerate(batch):
        out[k, :, :img.shape[1], :img.shape[2]] = img
    return out, torch.tensor([b[1] for b in batch], dtype=torch.int64)


COLLATE = {"default": None, "list": list_collate, "pad_tokens": pad_tokens, "pad_images": pad_images}


def make_loader(l, batches, seed):
    pin = bool(l["pin"])
    workers = l["workers"]
    return tud.DataLoader(
        Samples(l["sample"], batches * l["batch_size"], seed), batch_size=l["batch_size"], num_workers=workers,
        prefetch_factor=l["prefetch_factor"] if workers else 2, persistent_workers=bool(l["persistent"]) and workers > 0,
        pin_memory=pin, pin_memory_device="sim" if pin else "", drop_last=True, collate_fn=COLLATE[l["collate"]])


# Waits for full queues that gave up before the run is called stuck: a worker that never delivers
# (seen: workers forked while another loader's pin thread runs, waiting forever on a lock) would
# otherwise hold the run until the launcher's deadline.
STUCK_AFTER = 3


class Stuck(Exception):
    pass


class Pass:
    """What the loop needs of one iterator: the GPU-bound wait before each next(), the count of
    waits that gave up (reported, 0 expected), and the training step's all-reduce: with several
    ranks they step together, as DDP's do."""

    def __init__(self, spec):
        self.spec = spec
        self.unfilled = 0
        self.barrier = spec.get("step_barrier")

    def step(self, delay):
        time.sleep(delay)
        if self.barrier is not None:
            try:
                self.barrier.wait(timeout=120)
            except threading.BrokenBarrierError:
                raise Stuck("another rank stopped stepping (its barrier wait gave up)")

    def fill(self, it):
        if isinstance(it, tud.dataloader._MultiProcessingDataLoaderIter) and not wl.fill(it, self.spec):
            self.unfilled += 1
            if self.unfilled >= STUCK_AFTER:
                raise Stuck(f"{self.unfilled} waits of {self.spec['max_wait']} s for full queues gave up")

    def release(self, it):
        if isinstance(it, tud.dataloader._MultiProcessingDataLoaderIter):
            wl.release_pin_thread(it)


def eval_pass(loader, limit, box, p, delay):
    """One validation or test pass, written inline in the training loop's frame: `box` holds the loop
    variable of the previous pass (Python keeps it after the loop), alive while this pass starts its
    workers and replaced by its first batch; the pass's last batch is returned to be kept in turn.
    Broken off after `limit` batches (None: the whole pass), with the iterator's queues full."""
    it = iter(loader)
    p.fill(it)
    n = 0
    vbatch = box.pop() if box else None
    for vbatch in it:
        n += 1
        time.sleep(delay)
        if limit and n >= limit:
            break
        p.fill(it)
    p.release(it)
    it = None
    return vbatch, n


def eval_in_function(loader, limit, p, delay):
    """The same pass in a function of its own (a `validate(model, loader)`): nothing outlives it."""
    vbatch, n = eval_pass(loader, limit, [], p, delay)
    del vbatch
    return n


def run_eval(loader, e, box, p, delay):
    """A pass as the job writes it: inline (its last batch goes back into `box`) or in a function."""
    if e["inline"]:
        last, n = eval_pass(loader, e["limit"], box, p, delay)
        box.append(last)
        return n
    return eval_in_function(loader, e["limit"], p, delay)


def train_epoch(loader, loop, val, kept_val, p, delay):
    """One epoch's loop, in its own function (`train_one_epoch`): its variables go when it returns."""
    it = iter(loader)
    p.fill(it)
    steps = 0
    prev = None
    for batch in it:
        steps += 1
        p.step(delay)
        if val is not None and loop["val"]["when"] == "mid" and steps % loop["val"]["every"] == 0:
            run_eval(val, loop["val"], kept_val, p, delay)
        if loop["keep_prev"]:
            prev = batch
        p.fill(it)
    p.release(it)
    return steps


def rank_main(spec, rank, start_fd_r):
    """One rank of the job: its loaders, then the loop. Exits 0 when every pass consumed what it should."""
    try:
        # A job that hangs (a harness defect, not a crash) shows where: every thread's stack on stderr
        # before the launcher's deadline.
        import faulthandler
        faulthandler.dump_traceback_later(max(10, spec["timeout"] - 20), exit=False)
        job = spec["job"]
        p = Pass(spec)
        delay = spec["delay"]
        if any(l["pin"] for l in job["loaders"]):
            wl.install_pin_simulation()
        loop = job["loop"]
        ls = job["loaders"]
        train = make_loader(ls[0], loop["steps"], job["seed"] * 10 + rank)
        val = make_loader(ls[1], loop["val"]["batches"], job["seed"] * 10 + 5 + rank) if len(ls) > 1 else None
        test = make_loader(ls[2], loop["test"]["batches"], job["seed"] * 10 + 7 + rank) if len(ls) > 2 else None
        os.read(start_fd_r, 1)  # all ranks start together, as DDP ranks do
        total = 0
        kept_val = []  # an inline validation loop's variable, kept between passes
        batch = prev = None  # the training loop's variables, in this frame unless the epoch is a function
        for epoch in range(loop["epochs"]):
            if loop["epoch_in_function"]:
                total += train_epoch(train, loop, val, kept_val, p, delay)
            else:
                it = iter(train)  # a new iterator each epoch: fresh workers, or persistent workers' _reset
                p.fill(it)
                steps = 0
                for batch in it:  # `batch` keeps the previous batch alive while next() runs
                    steps += 1
                    p.step(delay)  # the training step ...
                    if val is not None and loop["val"]["when"] == "mid" and steps % loop["val"]["every"] == 0:
                        run_eval(val, loop["val"], kept_val, p, delay)
                    if loop["keep_prev"]:
                        prev = batch  # logged next step: until then the previous batch is alive too
                    p.fill(it)  # ... which outlasts loading
                p.release(it)
                it = None
                total += steps
            if val is not None and loop["val"]["when"] == "end":
                run_eval(val, loop["val"], kept_val, p, delay)
        if test is not None:
            run_eval(test, loop["test"], [], p, delay)
        want = loop["epochs"] * loop["steps"]
        print(f"GPU_RUN_BENCH_STATS rank {rank} unfilled={p.unfilled}", file=sys.stderr, flush=True)
        if total != want:
            print(f"rank {rank}: consumed {total} of {want} training batches", file=sys.stderr, flush=True)
            os._exit(3)
        os._exit(0)
    except Stuck as e:
        import faulthandler
        print(f"GPU_RUN_BENCH_STUCK rank {rank}: {e}", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(5)
    except BaseException as e:  # report PyTorch's message, exactly
        msg = f"{type(e).__name__}: {e}".strip().splitlines()
        print(f"GPU_RUN_BENCH_ERROR rank {rank}: {msg[0] if msg else type(e).__name__}", file=sys.stderr, flush=True)
        os._exit(1)
