"""A ResNet-50 training step fed by Tributary and by PyTorch's DataLoader.

    python bench/gpu_step.py --images DIR --shards DIR [--threads 1,2,4,8,16]
        [--workers 16] [--batch 256] [--steps 30] [--warmup 5] [--prefetch 2]
        [--no-pinned] [--json OUT]

Run by `bench/run.sh gpu` on a machine with a CUDA GPU. Every contender feeds
the same step: ResNet-50 (torchvision, random weights), bf16 autocast,
channels_last, SGD with momentum, on float32 N x 3 x 224 x 224 batches made by
RandomResizedCrop(224) + flip + normalise from the same JPEGs (ImageFolder for
the DataLoader, the packed shards for Tributary).

The "pinned" Tributary rows use `tributary.torch.Loader(..., device="cuda")`:
uint8 NHWC batches copied to the GPU ahead of the step through reused pinned
buffers on a side stream, and normalised there (`normalize=True`) into the
same float32 channels_last batches; the step's own copy is then a no-op.

Two floors come first: one batch in host memory, copied to the GPU each
step (a pageable loader's best), and one batch already on the GPU (the best
of a loader that hands over device tensors, as the pinned rows do).

A step's time is the time blocked in `next()` (the data wait) plus the time
from the batch in hand to the step finished on the GPU (the copy to the GPU
included, synchronised). Data wait % = waits / (waits + steps), over
`--steps` steps after `--warmup`; both loaders prefetch in the background
meanwhile, so a loader that keeps up shows a wait near 0 %.
"""

import argparse
import itertools
import json
import os
import sys
import time

import torch
import torchvision
from torchvision import transforms


def model_and_step(device):
    model = torchvision.models.resnet50().to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(images, labels):
        images = images.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()

    return step


def measure(name, batches, step, warmup, steps, batch):
    """Runs warmup + steps steps, returning the row."""
    started = time.perf_counter()
    first = None
    waits, computes = [], []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        images, labels = next(batches)
        t1 = time.perf_counter()
        if first is None:
            first = t1 - started
        step(images, labels)
        t2 = time.perf_counter()
        if i >= warmup:
            waits.append(t1 - t0)
            computes.append(t2 - t1)
    wait, compute = sum(waits), sum(computes)
    row = {
        "contender": name,
        "data_wait_pct": 100.0 * wait / (wait + compute),
        "images_per_s": steps * batch / (wait + compute),
        "step_ms": 1000.0 * (wait + compute) / steps,
        "gpu_step_ms": 1000.0 * compute / steps,
        "first_batch_s": first,
    }
    print(
        f"{name:<42} data wait {row['data_wait_pct']:5.1f} %  "
        f"{row['images_per_s']:7.0f} img/s  step {row['step_ms']:6.1f} ms "
        f"(GPU {row['gpu_step_ms']:5.1f} ms)  first batch {first:5.1f} s",
        flush=True,
    )
    return row


def dataloader_batches(images, workers, batch):
    normalize = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    dataset = torchvision.datasets.ImageFolder(
        images,
        transforms.Compose(
            [
                transforms.RandomResizedCrop(224),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                normalize,
            ]
        ),
    )
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=True,
        drop_last=True,
        persistent_workers=False,
        prefetch_factor=4,
    )
    return iter(loader)


def tributary_batches(shards, threads, batch):
    import tributary

    loader = tributary.Loader(
        shards, batch_size=batch, image_size=224, decode_threads=threads, seed=1
    )
    # The arrays own the Rust buffers: no copy here; the step copies them to
    # the GPU (from pageable memory, counted in the step, not the wait).
    for images, labels in loader:
        yield torch.from_numpy(images), torch.from_numpy(labels)


def tributary_device_batches(shards, threads, batch, prefetch):
    import tributary.torch

    loader = tributary.torch.Loader(
        shards, batch_size=batch, image_size=224, decode_threads=threads, seed=1,
        dtype="uint8", layout="NHWC", device="cuda", normalize=True, prefetch=prefetch,
    )
    # Already on the GPU, normalised, ready on the current stream.
    for images, labels in loader:
        yield images, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", required=True)
    parser.add_argument("--shards", required=True)
    parser.add_argument("--threads", default="1,2,4,8,16")
    parser.add_argument("--workers", type=int, default=16,
                        help="the DataLoader's workers (0: leave its row out)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--prefetch", type=int, default=2,
                        help="batches the pinned rows copy to the GPU ahead (the loader's prefetch=)")
    parser.add_argument("--no-pinned", action="store_true",
                        help='leave out the rows of Tributary with device="cuda"')
    parser.add_argument("--json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_step.py needs a CUDA GPU")
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    step = model_and_step(device)
    print(
        f"{torch.cuda.get_device_name()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"batch {args.batch}, {args.steps} steps after {args.warmup}",
        flush=True,
    )
    rows = []

    def run(name, batches):
        rows.append(measure(name, batches, step, args.warmup, args.steps, args.batch))

    # The floors: one batch in host memory, copied each step; the same batch
    # already on the GPU (what a loader handing over device tensors can reach).
    images = torch.randn(args.batch, 3, 224, 224)
    labels = torch.randint(0, 10, (args.batch,))
    run("no loader (one batch, resident)", itertools.repeat((images, labels)))
    on_gpu = images.to(device).contiguous(memory_format=torch.channels_last), labels.to(device)
    run("no loader (one batch, on the GPU)", itertools.repeat(on_gpu))
    if args.workers > 0:
        run(f"PyTorch DataLoader, {args.workers} workers",
            dataloader_batches(args.images, args.workers, args.batch))
    threads = [int(t) for t in args.threads.split(",")]
    for n in threads:
        run(f"Tributary, {n} decode threads", tributary_batches(args.shards, n, args.batch))
    if not args.no_pinned:
        for n in threads:
            run(f"Tributary pinned, {n} threads, prefetch {args.prefetch}",
                tributary_device_batches(args.shards, n, args.batch, args.prefetch))
    if args.json:
        with open(args.json, "w") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
