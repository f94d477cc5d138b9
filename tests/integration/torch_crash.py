#!/usr/bin/python3
"""Real PyTorch jobs that die of a too-small /dev/shm, for gpu-run-ctl doctor's crash tests.

    /usr/bin/python3 torch_crash.py dataloader   # workers collate 3x224x224 float32 batches of 64
    /usr/bin/python3 torch_crash.py share        # the main process shares a 64 MiB tensor

Nothing is caught: the log holds what PyTorch itself prints (a worker's bus error and the
DataLoader's RuntimeError; or the main process killed by SIGBUS, exit status 135).
"""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __len__(self):
        return 10000

    def __getitem__(self, i):
        return torch.zeros((3, 224, 224)), i


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "dataloader"
    if mode == "share":
        torch.zeros(64 * 1024 * 1024 // 4).share_memory_()
        print("shared 64 MiB")
        return 0
    loader = DataLoader(Images(), batch_size=64, num_workers=2, prefetch_factor=2)
    for step, _ in enumerate(loader):
        time.sleep(0.05)
        if step == 20:
            break
    print("20 batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
