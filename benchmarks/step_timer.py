"""A training loop that times its own steps, for measuring `portscan verify`'s hooks.

    python benchmarks/step_timer.py --steps 2000 --width 128 --out times.json

Each step (forward, backward, optimizer step: where the hooks sit) is timed with
perf_counter; the median step time goes to ``--out``. Run it plain and under
`portscan verify --steps N+1` (so the script, not the cap, ends the loop) and compare:
step medians are robust to the noise of a shared machine, unlike process wall times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(784, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images, labels = torch.randn(64, 784), torch.randint(0, 10, (64,))
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    with open(args.out, "w") as fh:
        json.dump({"median_ms": statistics.median(times) * 1000}, fh)


if __name__ == "__main__":
    main()
