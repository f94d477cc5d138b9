#!/usr/bin/python3
"""A real PyTorch DataLoader workload for measuring how much /dev/shm it needs.

N ranks are simulated as N processes (forked from one launcher, as torchrun starts one
process per GPU), each with its own DataLoader over a synthetic Dataset whose samples have
a profile's field shapes and dtypes. The consumer sleeps per batch (a GPU-bound training
step), so the workers run ahead and fill the prefetch queues to PyTorch's limit.

Run it with Debian's interpreter (/usr/bin/python3, python3-torch 1.13, CPU only):

    /usr/bin/python3 bench/torch/workload.py --field 3x224x224:float32 --field :int64 \
        --batch-size 64 --workers 4 --prefetch-factor 2 --ranks 1 [--pin-memory] \
        [--shm-size 64m]

With --shm-size it first enters a private mount namespace with a fresh tmpfs of that size on
/dev/shm (needs root), like a container's /dev/shm; without it, it uses the /dev/shm it finds.
It prints one JSON line: {"ok": ..., "error": PyTorch's message or null, "peak_shm_bytes": ...}
and exits 0 only when every rank consumed every batch.

pin_memory: torch 1.13 without CUDA silently turns pin_memory off (the iterator's
_pin_memory = pin_memory and torch.cuda.is_available()), so the pin thread would never run.
With --pin-memory (and pin_mode "sim", the default) this workload runs PyTorch's own pin thread
(_utils.pin_memory._pin_memory_loop, with the real queues) and replaces only the copy into
page-locked CUDA host memory by a copy into ordinary process memory (Tensor.clone). Both
copies take the batch out of /dev/shm and drop the shared-memory original, which is the effect
on /dev/shm that matters here. pin_mode "off" keeps PyTorch's behaviour on this machine (no pin
thread at all).
"""

import argparse
import ctypes
import json
import os
import re
import select
import signal
import sys
import tempfile
import threading
import time

import torch
import torch.utils.data as tud
from torch.utils.data import _utils as tud_utils

DTYPES = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


class SyntheticDataset(tud.Dataset):
    """Samples of the given (shape, dtype) fields. torch.zeros writes every page, as a real
    decode/augment pipeline does; the values do not matter for /dev/shm."""

    def __init__(self, fields, length):
        self.fields = [(tuple(shape), DTYPES[dtype]) for shape, dtype in fields]
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return tuple(torch.zeros(shape, dtype=dt) for shape, dt in self.fields)


# Pin-thread lag (pin_mode "sim"): each loader's pin thread may be stalled by its loop (pin_lag_fill)
# so that every outstanding batch is in /dev/shm at once, as when the thread falls behind the workers.
# Keyed by the pin thread's ident; a thread with no gate copies at once.
_GATES = {}
_HELD = {}   # the pin thread holds a batch it took off the result queue and waits to copy


def _clone_out_of_shm(data, device=None):
    gate = _GATES.get(threading.get_ident())
    if gate is not None and not gate.is_set():
        _HELD[threading.get_ident()] = 1
        gate.wait()
        _HELD[threading.get_ident()] = 0
    return _clone_tree(data)


def _clone_tree(data):
    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, (list, tuple)):
        return [_clone_tree(d) for d in data]
    if isinstance(data, dict):
        return {k: _clone_tree(v) for k, v in data.items()}
    return data


def install_pin_simulation():
    """Make torch 1.13 start its pin-memory thread without CUDA (see the module docstring)."""
    torch.cuda.current_device = lambda: 0
    torch.cuda.set_device = lambda device: None
    tud_utils.pin_memory.pin_memory = _clone_out_of_shm


def batch_bytes_estimate(fields, batch_size):
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for shape, dtype in fields:
        n = batch_size * torch.tensor([], dtype=DTYPES[dtype]).element_size()
        for d in shape:
            n *= d
        total += (n + page - 1) // page * page
    return total


def finished_waiting(it):
    """How many of the rank's outstanding batches are finished and waiting for the consumer:
    in the worker result queue (no pin thread) or already pinned (pin thread)."""
    if it._pin_memory:
        return it._data_queue.qsize()
    return it._worker_result_queue.qsize()


def wait_until_full(it, max_wait):
    """The consumer of GPU-bound training: the step takes longer than loading, so by the time
    it asks for the next batch every outstanding batch (prefetch_factor * workers of them,
    PyTorch's limit) is finished. Waits for exactly that, so the queues are full each time."""
    return _wait_for(it, lambda: finished_waiting(it) >= it._tasks_outstanding, max_wait,
                     lambda: finished_waiting(it))


def _wait_for(it, cond, max_wait, progress):
    """Waits until cond(); gives up after max_wait seconds in which progress() did not change (a
    loaded machine may take longer than that for all of a large prefetch, but never that long
    without a batch moving)."""
    deadline = time.monotonic() + max_wait
    seen = progress()
    while not cond():
        # A worker killed meanwhile (SIGBUS on a full /dev/shm): raise PyTorch's own error now
        # (its SIGCHLD path) rather than after next()'s 5 s status-check timeout.
        torch._C._error_if_any_worker_fails()
        now = progress()
        if now != seen:
            seen, deadline = now, time.monotonic() + max_wait
        elif time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def pin_lag_fill(it, max_wait):
    """The worst case of a pin thread that falls behind (a training step that holds the GIL, or
    cudaHostAlloc waiting for the device on a cache miss of PyTorch's pinned-memory allocator):
    while the loop consumes the batches the thread pinned before, the thread copies nothing, so
    every outstanding batch (prefetch_factor * workers, PyTorch's limit) is finished by the workers
    and still in /dev/shm; then it catches up and pins all of them. Called after iter() and after
    each step; acts only when the loop has consumed every pinned batch."""
    ident = it._pin_memory_thread.ident
    gate = _GATES.setdefault(ident, threading.Event())
    gate.clear()
    if it._data_queue.qsize() > 0:
        return True
    def moved():
        return it._worker_result_queue.qsize(), _HELD.get(ident, 0), it._data_queue.qsize()

    # A batch the thread was copying when the gate closed lands in the data queue after the check
    # above: it counts as finished, or the wait misses it by one and gives up after max_wait, and a
    # rank whose waits give up 3 times stops as stuck (bench/torch/fuzz-runs/3-cases-51-57.json's
    # hung run had a pin thread at its gate while its rank's waits gave up).
    full = _wait_for(it, lambda: it._worker_result_queue.qsize() + _HELD.get(ident, 0) + it._data_queue.qsize()
                     >= it._tasks_outstanding, max_wait, moved)
    gate.set()
    pinned = _wait_for(it, lambda: it._data_queue.qsize() >= it._tasks_outstanding, max_wait, moved)
    if pinned:  # else leave it running: the loop's next() must not wait on a stalled thread
        gate.clear()
    return full and pinned


def release_pin_thread(it):
    """Let the pin thread run freely again (before a persistent loader's _reset, and at the end)."""
    if getattr(it, "_pin_memory", False) and it._pin_memory_thread is not None:
        gate = _GATES.get(it._pin_memory_thread.ident)
        if gate is not None:
            gate.set()


def fill(it, spec):
    """Before the loop asks for its next batch: the queues as full as GPU-bound training has them."""
    if it._pin_memory and spec.get("pin_lag", True) and spec.get("pin_mode", "sim") == "sim":
        return pin_lag_fill(it, spec["max_wait"])
    return wait_until_full(it, spec["max_wait"])


def make_loader(spec, fields, batches, batch_size, workers, prefetch_factor, persistent):
    sim_pin = spec["pin_memory"] and spec.get("pin_mode", "sim") == "sim"
    ds = SyntheticDataset(fields, batches * batch_size)
    return tud.DataLoader(
        ds, batch_size=batch_size, num_workers=workers, prefetch_factor=prefetch_factor,
        pin_memory=spec["pin_memory"], pin_memory_device=("sim" if sim_pin else ""), drop_last=True,
        persistent_workers=persistent)


def validate(val_loader, v, spec, box):
    """A validation pass mid-epoch (Lightning's val_check_interval, limit_val_batches): the
    training loader keeps its prefetched batches and the loop's current batch while this loader
    fills its own queues. It stops after v["steps"] batches with its queues full, so with
    persistent workers the prefetched validation batches stay in /dev/shm while training goes on.
    Each pass calls iter() anew (a fresh iterator and workers, or persistent workers' _reset).
    v["keep_last"]: the loop variable still holds the last validation batch when training resumes
    (a `for vbatch in val_loader:` at the training loop's level); `box` holds the previous pass's,
    alive until this pass's first batch replaces it. Returns (batches, unfilled waits, last batch)."""
    vit = iter(val_loader)
    unfilled = 0 if fill(vit, spec) else 1
    got = 0
    vbatch = box.pop()
    for vbatch in vit:
        got += 1
        time.sleep(spec["delay"])
        if not fill(vit, spec):
            unfilled += 1
        if got >= v["steps"]:
            break
    release_pin_thread(vit)  # a persistent loader's next _reset drains through it
    vit = None
    return got, unfilled, (vbatch if v.get("keep_last") else None)


def init_nccl(spec, rank):
    """GPU hosts only (--nccl): a real NCCL communicator between the ranks, one GPU each, so its
    /dev/shm segments count in the measurement; returns the step's all-reduce."""
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(spec["nccl_port"]))
    dist.init_process_group("nccl", rank=rank, world_size=spec["ranks"])
    grad = torch.ones(spec.get("nccl_elements", 1 << 22), device=f"cuda:{rank}")

    def step():
        dist.all_reduce(grad)
        torch.cuda.synchronize()
    step()  # connects the ring and tree channels (NCCL_RUNTIME_CONNECT connects on first use)
    return step


def rank_main(spec, rank, start_fd_r):
    """One rank: its own DataLoader(s), a consumer slower than the workers."""
    try:
        sim_pin = spec["pin_memory"] and spec.get("pin_mode", "sim") == "sim"
        if sim_pin:
            install_pin_simulation()
        nccl_step = init_nccl(spec, rank) if spec.get("nccl") else None
        n = spec["batches"]
        loader = make_loader(spec, spec["fields"], n, spec["batch_size"], spec["workers"], spec["prefetch_factor"],
                             spec.get("persistent_workers", False))
        v = spec.get("val")
        val_loader = None
        if v:
            val_loader = make_loader(spec, v["fields"], v["batches"], v["batch_size"], v["workers"],
                                     v["prefetch_factor"], v["persistent_workers"])
        os.read(start_fd_r, 1)  # all ranks start together, as DDP ranks do
        it = iter(loader)       # starts the workers; prefetch_factor*workers indices go out at once
        got = unfilled = 0
        last_vbatch = None
        if not fill(it, spec):
            unfilled += 1
        for batch in it:        # `batch` keeps the previous batch alive while next() runs
            got += 1
            if nccl_step:
                nccl_step()
            time.sleep(spec["delay"])  # the training step ...
            if not fill(it, spec):     # ... which outlasts loading
                unfilled += 1
            if v and got % v["every"] == 0:
                box, last_vbatch = [last_vbatch], None
                vgot, vunfilled, last_vbatch = validate(val_loader, v, spec, box)
                unfilled += vunfilled
                if vgot != v["steps"]:
                    print(f"rank {rank}: validation consumed {vgot} of {v['steps']} batches", file=sys.stderr, flush=True)
                    os._exit(3)
        release_pin_thread(it)
        it = last_vbatch = None
        if got:
            del batch
        print(f"GPU_RUN_BENCH_STATS rank {rank} unfilled={unfilled}", file=sys.stderr, flush=True)
        if got != n:
            print(f"rank {rank}: consumed {got} of {n} batches", file=sys.stderr, flush=True)
            os._exit(3)
        os._exit(0)
    except BaseException as e:  # report PyTorch's message, exactly
        msg = f"{type(e).__name__}: {e}".strip().splitlines()
        print(f"GPU_RUN_BENCH_ERROR rank {rank}: {msg[0] if msg else type(e).__name__}", file=sys.stderr, flush=True)
        os._exit(1)


def val_spec(fields, batch_size, workers, prefetch_factor, persistent, every, keep_last=False):
    """A validation loader run every `every` training steps, stopped with its queues full after
    prefetch_factor*workers + 2 batches (of a dataset twice that long). keep_last: the loop
    variable keeps the last validation batch while training resumes (validate)."""
    steps = prefetch_factor * workers + 2
    return {"fields": fields, "batch_size": batch_size, "workers": workers, "prefetch_factor": prefetch_factor,
            "persistent_workers": persistent, "steps": steps, "batches": 2 * steps + 2, "every": every,
            "keep_last": keep_last}


def default_batches(prefetch_factor, workers):
    """Fill the queues, then refill them twice over (every worker several times)."""
    return 2 * prefetch_factor * workers + 4


def shm_used():
    st = os.statvfs("/dev/shm")
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def launch(spec):
    """Run spec["ranks"] ranks against the current /dev/shm. Returns a result dict. spec["job"]: the
    ranks run bench/torch/job.py's training job (several loaders, loop shapes) instead of rank_main."""
    ranks = spec["ranks"]
    if spec.get("job"):
        import job
        rank_fn = job.rank_main
        # DDP's ranks step together (the gradients' all-reduce): a barrier each training step. Its
        # semaphores are made before the baseline is read, so they are not counted.
        if ranks > 1:
            import multiprocessing
            spec = dict(spec, step_barrier=multiprocessing.get_context("fork").Barrier(ranks))
    else:
        rank_fn = rank_main
    base_used = shm_used()
    r, w = os.pipe()
    pids = {}
    for k in range(ranks):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            rank_fn(spec, k, r)
            os._exit(4)
        pids[pid] = k
    os.close(r)
    os.write(w, b"x" * ranks)
    os.close(w)
    t0 = time.monotonic()
    peak = 0
    trace = [] if spec.get("trace") else None  # (seconds, bytes) of every sample, for bench/guard's learn analysis
    failed = {}
    deadline = t0 + spec["timeout"]
    while pids:
        used = shm_used() - base_used
        if used > peak:
            peak = used
        if trace is not None:
            trace.append((round(time.monotonic() - t0, 4), used))
        for pid in list(pids):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                k = pids.pop(pid)
                code = os.waitstatus_to_exitcode(status)
                if code != 0:
                    failed[k] = code
        if failed or time.monotonic() > deadline:
            break
        time.sleep(0.002)
    timed_out = bool(pids) and not failed
    for pid in pids:  # a failed rank ends the job, as in torchrun
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        os.waitpid(pid, 0)
    return {
        "ok": not failed and not timed_out,
        "failed_ranks": {str(k): v for k, v in failed.items()},
        "timed_out": timed_out,
        "peak_shm_bytes": peak,
        "batch_bytes": None if spec.get("job") else batch_bytes_estimate(spec["fields"], spec["batch_size"]),
        "val_batch_bytes": batch_bytes_estimate(spec["val"]["fields"], spec["val"]["batch_size"]) if spec.get("val") else None,
        "elapsed": round(time.monotonic() - t0, 3),
        **({"trace": trace} if trace is not None else {}),
    }


# --- private mount namespace with a tmpfs on /dev/shm --------------------------------------
CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def enter_shm_namespace(size_bytes):
    """unshare -m --propagation private; mount -t tmpfs -o size=SIZE shm /dev/shm"""
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    if _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
    opts = f"size={size_bytes},mode=1777".encode()
    if _libc.mount(b"shm", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) != 0:
        raise OSError(ctypes.get_errno(), "mount tmpfs on /dev/shm")


def measure(spec, shm_bytes):
    """Fork a child that enters a private mount namespace with a tmpfs of shm_bytes on
    /dev/shm and runs the workload there. Returns the result dict plus "error" (the PyTorch
    message from the first failing rank) and "bus_error" (the worker's SIGBUS report seen)."""
    errfile = tempfile.TemporaryFile()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setsid()
            os.dup2(errfile.fileno(), 2)
            enter_shm_namespace(shm_bytes)
            res = launch(spec)
        except BaseException as e:
            res = {"ok": False, "setup_error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(res).encode())
        os.close(w)
        os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + spec["timeout"] + 30  # the launcher has its own deadline; this is the backstop
    while True:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.killpg(pid, signal.SIGKILL)
            break
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    try:  # stragglers in the child's session (workers of killed ranks)
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        res = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        res = {}
    res.setdefault("ok", False)
    errfile.seek(0)
    err = errfile.read().decode(errors="replace")
    errfile.close()
    res["stderr_tail"] = err[-2000:]
    res["bus_error"] = "bus error" in err.lower()
    # A job that stopped making progress (bench/torch/job.py: its queues never filled, or the launcher's
    # deadline passed) hung; it did not crash for lack of /dev/shm.
    res["hung"] = bool(res.get("timed_out")) or "GPU_RUN_BENCH_STUCK" in err
    hung_msg = None
    if res["hung"]:
        i = err.find("GPU_RUN_BENCH_STUCK")
        res["hang_stacks"] = err[i:i + 12000] if i >= 0 else err[-12000:]
        hung_msg = ("hung: " + err[i:].splitlines()[0].split(":", 1)[1].strip()) if i >= 0 else "hung: timeout"
    msg = None
    for line in err.replace("\x00", "").splitlines():
        if "GPU_RUN_BENCH_ERROR" in line:
            msg = line.split("GPU_RUN_BENCH_ERROR", 1)[1].split(":", 1)[1].strip()
            break
    if msg is None and not res["ok"]:
        msg = res.get("setup_error") or ("timeout" if res.get("timed_out") else
                                          (err.strip().splitlines() or ["failed without a message"])[-1])
    res["error"] = hung_msg or msg
    res["unfilled_waits"] = sum(int(m) for m in re.findall(r"GPU_RUN_BENCH_STATS rank \d+ unfilled=(\d+)", err))
    res["shm_bytes"] = shm_bytes
    return res


def parse_size(s):
    s = s.strip().lower()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def parse_field(s):
    shape, dtype = s.split(":")
    return [[int(d) for d in shape.split("x")] if shape else [], dtype]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--field", action="append", required=True, help="SHAPE:DTYPE, e.g. 3x224x224:float32, :int64")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--pin-memory", action="store_true")
    ap.add_argument("--pin-mode", choices=["sim", "off", "real"], default="sim",
                    help="sim: PyTorch's pin thread copying into ordinary memory (no CUDA here); real: a GPU host")
    ap.add_argument("--nccl", action="store_true",
                    help="GPU hosts: the ranks all-reduce over NCCL every step (one GPU per rank), so NCCL's "
                         "/dev/shm segments are measured too")
    ap.add_argument("--batches", type=int, help="per rank (default 2*prefetch*workers+4)")
    ap.add_argument("--delay", type=float, default=0.02, help="consumer seconds per batch before it waits for full queues")
    ap.add_argument("--max-wait", type=float, default=30, help="longest wait for full queues per batch")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--persistent-workers", action="store_true", help="persistent_workers=True on every loader")
    ap.add_argument("--val-batch-size", type=int, help="also a validation loader, run mid-epoch, with this batch size")
    ap.add_argument("--val-workers", type=int, default=2)
    ap.add_argument("--val-prefetch-factor", type=int, default=2)
    ap.add_argument("--val-keep-last", action="store_true",
                    help="the loop variable keeps the last validation batch while training resumes")
    ap.add_argument("--shm-size", help="run in a private mount namespace with a tmpfs of this size on /dev/shm")
    a = ap.parse_args()
    spec = {
        "fields": [parse_field(f) for f in a.field], "batch_size": a.batch_size, "workers": a.workers,
        "prefetch_factor": a.prefetch_factor, "ranks": a.ranks, "pin_memory": a.pin_memory,
        "pin_mode": a.pin_mode, "batches": a.batches or default_batches(a.prefetch_factor, a.workers),
        "delay": a.delay, "max_wait": a.max_wait, "timeout": a.timeout, "persistent_workers": a.persistent_workers,
        "nccl": a.nccl, "nccl_port": 29500 + os.getpid() % 20000,
    }
    if (a.nccl or a.pin_mode == "real") and not torch.cuda.is_available():
        sys.exit("workload.py: --nccl and --pin-mode real need CUDA GPUs (torch.cuda.is_available() is False here)")
    if a.nccl and torch.cuda.device_count() < a.ranks:
        sys.exit(f"workload.py: --nccl needs one GPU per rank: {a.ranks} ranks, {torch.cuda.device_count()} GPUs")
    if a.val_batch_size:
        spec["val"] = val_spec(spec["fields"], a.val_batch_size, a.val_workers, a.val_prefetch_factor,
                               a.persistent_workers, a.prefetch_factor * a.workers + 2, a.val_keep_last)
    if a.shm_size:
        res = measure(spec, parse_size(a.shm_size))
        res.pop("stderr_tail", None)
        sys.stderr.write("" if res["ok"] else (res["error"] or "") + "\n")
    else:
        res = launch(spec)
    print(json.dumps(res))
    sys.exit(0 if res["ok"] else 1)


if __name__ == "__main__":
    main()
