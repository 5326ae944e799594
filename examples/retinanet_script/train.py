"""orch's small RetinaNet written as a user's own training script: the detector, its loss and the synthetic
shapes come from `workloads.retinanet` (as a user imports their model code); the optimizer, DDP and the loop
are the script's own. Lines marked `# orch` are all orch needs (docs/own-script.md); outside orch they do nothing:

    python examples/retinanet_script/train.py --epochs 1 --train-samples 32
    torchrun --nproc-per-node 2 examples/retinanet_script/train.py --batch-size 4

benchmarks/bench_script_vs_builtin.py sweeps it beside orch's built-in `retinanet` workload with the same
settings: the two must agree within the repeats' noise, or a script's timing would not be orch's.

`--cache-batches N` renders N batches of this rank's shard before training and cycles them, as orch's own
loop does with `measure.data: memory`; with 0 every batch is rendered inside the step (and timed with it).
"""

import argparse
import itertools
import os

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import BatchSampler, DistributedSampler

import orch.script  # orch
from workloads.retinanet.data import collate, make_dataset
from workloads.retinanet.frozen_bn import fuse_frozen_batchnorm
from workloads.retinanet.model import RetinaNetTrainingLoss, build_detector
from workloads.retinanet.workload import RetinaNetParams

HOOKS = {"bf16": default_hooks.bf16_compress_hook, "fp16": default_hooks.fp16_compress_hook}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8, help="images per rank per step")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backbone", default="resnet18")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--train-samples", type=int, default=256)
    parser.add_argument("--max-objects", type=int, default=3)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--focal-loss", choices=["reference", "kernel"], default="kernel")
    parser.add_argument("--frozen-bn", choices=["reference", "fused"], default="fused")
    parser.add_argument("--ddp-comm-hook", choices=["none", "bf16", "fp16"], default="none")
    parser.add_argument("--ddp-bucket-mb", type=float, default=25.0)
    parser.add_argument("--ddp-grad-as-bucket-view", action="store_true")
    parser.add_argument("--cache-batches", type=int, default=0, help="0: render every batch inside its step")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group()
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    params = RetinaNetParams(backbone=args.backbone, trainable_layers=5, image_size=args.image_size,
                             classes=args.classes, train_samples=args.train_samples, max_objects=args.max_objects,
                             precision=args.precision, focal_loss=args.focal_loss, frozen_bn=args.frozen_bn,
                             memory_format="channels_last" if args.channels_last else "contiguous")
    torch.manual_seed(args.seed)
    train_set = make_dataset(params, "train")

    detector = build_detector(params)
    if args.frozen_bn == "fused":
        fuse_frozen_batchnorm(detector.backbone)
    if args.channels_last:
        detector = detector.to(memory_format=torch.channels_last)
    model = RetinaNetTrainingLoss(detector, bf16=args.precision == "bf16", channels_last=args.channels_last)
    trained = [p for p in model.parameters() if p.requires_grad]
    try:
        optimizer = torch.optim.AdamW(trained, lr=args.lr, fused=True)
    except RuntimeError:   # no fused CPU kernel in this torch
        optimizer = torch.optim.AdamW(trained, lr=args.lr, foreach=True)
    if distributed:
        model = DistributedDataParallel(model, bucket_cap_mb=args.ddp_bucket_mb,
                                        gradient_as_bucket_view=args.ddp_grad_as_bucket_view)
        if args.ddp_comm_hook != "none":
            model.register_comm_hook(state=None, hook=HOOKS[args.ddp_comm_hook])
    orch.script.model(model)  # orch

    sampler = DistributedSampler(range(len(train_set)), num_replicas=world, rank=rank, seed=args.seed, drop_last=True)

    def batches(epoch: int):
        sampler.set_epoch(epoch)
        for indices in BatchSampler(sampler, args.batch_size, drop_last=True):
            yield collate([train_set[i] for i in indices])

    cached = list(itertools.islice((b for e in itertools.count() for b in batches(e)), args.cache_batches))
    for epoch in range(args.epochs):
        for images, targets in batches(epoch) if not cached else cached:
            optimizer.zero_grad(set_to_none=True)
            loss = model(images, targets)
            loss.backward()
            optimizer.step()
            orch.script.step(samples=len(images))  # orch
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {loss.item():.3f}", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
