"""A plain data-parallel training script: a small MLP on synthetic Gaussian clusters, torch.distributed and
DistributedDataParallel, options by argparse. It runs as it is with python or torchrun:

    python examples/ddp_script/train.py --epochs 3
    torchrun --nproc-per-node 2 examples/ddp_script/train.py --batch-size 32

and under orch, which lays it out over ranks × threads × local batch (examples/ddp_script/sweep.yaml):

    orch sweep examples/ddp_script/sweep.yaml

The only lines orch needs are marked `# orch`; outside orch they do nothing (docs/own-script.md).
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import orch.script  # orch


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--train-samples", type=int, default=2048)
    parser.add_argument("--test-samples", type=int, default=1024)
    return parser.parse_args()


def make_data(samples: int, split_seed: int, features: int = 32, classes: int = 8) -> TensorDataset:
    """Gaussian clusters around fixed centres (the same on every rank and run), unit noise."""
    centres = torch.randn(classes, features, generator=torch.Generator().manual_seed(1234))
    centres = centres / centres.norm(dim=1, keepdim=True) * 3.0
    gen = torch.Generator().manual_seed(split_seed)
    labels = torch.randint(0, classes, (samples,), generator=gen)
    return TensorDataset(centres[labels] + torch.randn(samples, features, generator=gen), labels)


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    """Accuracy over the whole test set: each rank scores its shard, the counts are summed."""
    model.eval()
    counts = torch.zeros(2)
    with torch.no_grad():
        for x, y in loader:
            counts += torch.tensor([(model(x).argmax(dim=1) == y).sum().item(), len(y)])
    model.train()
    if dist.is_initialized():
        dist.all_reduce(counts)
    return (counts[0] / counts[1]).item()


def main() -> None:
    args = parse_args()
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group()   # env:// from torchrun's (or orch's) RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(args.seed)

    train_set, test_set = make_data(args.train_samples, 1), make_data(args.test_samples, 2)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=256,
                             sampler=DistributedSampler(test_set, num_replicas=world, rank=rank, shuffle=False))

    net = nn.Sequential(nn.Linear(32, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                        nn.Linear(args.hidden, 8))
    model = DistributedDataParallel(net) if distributed else net
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    orch.script.model(model)  # orch
    orch.script.flops(per_sample=6 * sum(p.numel() for p in net.parameters()))  # orch: 6 FLOPs per weight

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            orch.script.step(samples=len(x))  # orch
        accuracy = evaluate(model, test_loader)
        orch.script.metric("accuracy", accuracy, epoch=epoch + 1)  # orch
        if rank == 0:
            print(f"epoch {epoch + 1}: accuracy {accuracy:.3f}", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
