"""One contender of the throughput comparison, run in a process of its own;
prints one JSON line: samples, seconds, the steady samples/s (from half-way
to 80% of the first epoch; overall too), first batch latency, peak RSS (overall and within each epoch), and the
CPU seconds used by the contender and by the `--watch`ed processes (the S3
server and the delaying proxy, which share this machine's cores).

    python bench/contenders.py torch-folder  --images DIR  [--workers N]
    python bench/contenders.py torch-s3      --bucket B --keys FILE --endpoint URL [--workers N]
    python bench/contenders.py tributary     --dataset URL [--endpoint URL] [--threads N] [--epochs E]
                                             [--dtype uint8] [--fields image,label]
    python bench/contenders.py hf-datasets   --parquet FILE... [--workers N]
    ... [--transform eval]    (torch-folder, tributary)

Every contender makes the `train` preset, RandomResizedCrop(224) +
horizontal flip + normalise, float32 N x 3 x 224 x 224, batches of 64, and
reads every image once per epoch. `hf-datasets` is Hugging Face `datasets`
streaming the Parquet files (`load_dataset("parquet", streaming=True)`, a
shuffle buffer of 1024 like Tributary's, PIL decoding, the torchvision
transforms in `.map`) under a torch DataLoader, whose workers split the
files between them (as `datasets` does: it needs files >= workers).
`--fields` picks Tributary's columns (a Parquet dataset's `image,label`). `--transform eval` makes torchvision's
evaluation preset instead, Resize(256) + CenterCrop(224) + normalise, read
in order (an unshuffled DataLoader; Tributary's `shuffle=False` reading).
`--dtype uint8` (Tributary only) yields raw uint8 pixels N x 224 x 224 x 3
(NHWC), left for the GPU to normalise. Peak RSS is the largest sum, over the process and its children (the
DataLoader's workers), of the resident sets sampled every 20 ms.
"""

import argparse
import json
import os
import threading
import time


class PeakRss:
    """Samples the resident set of this process and its descendants."""

    def __init__(self) -> None:
        self.peak = 0
        self.epoch = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _tree(pid: int) -> list:
        pids, frontier = [pid], [pid]
        while frontier:
            parent = frontier.pop()
            try:
                with open(f"/proc/{parent}/task/{parent}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue
            pids += children
            frontier += children
        return pids

    def now(self) -> int:
        total = 0
        for pid in self._tree(os.getpid()):
            try:
                with open(f"/proc/{pid}/statm") as f:
                    total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except OSError:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            now = self.now()
            self.peak = max(self.peak, now)
            self.epoch = max(self.epoch, now)

    def epoch_peak(self) -> int:
        """The peak since the last call, in MiB; starts a new one."""
        peak, self.epoch = max(self.epoch, self.now()), 0
        return round(peak / 2**20)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.now()) / 2**20


def window_rate(progress: list, start: float, end: float) -> float:
    """Samples/s between the batches that reach `start` and `end` of the
    first epoch's samples. The steady rate: by half-way the data fetched
    ahead while the first batch was made is used up, and before 80% the
    shuffle buffer has not begun to drain (which needs no fetching)."""
    total = progress[-1][1]
    t0, s0 = next(p for p in progress if p[1] >= start * total)
    t1, s1 = next(p for p in progress if p[1] >= end * total)
    return (s1 - s0) / max(t1 - t0, 1e-9)


def cpu_seconds(pids: list) -> float:
    """User + system CPU time of `pids` and their descendants (the
    DataLoader's workers count once they have exited and been waited for)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in {p for root in pids for p in PeakRss._tree(root)}:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # utime, stime, cutime, cstime: fields 14-17 of stat(5).
            total += sum(int(x) for x in fields[11:15]) / ticks
        except OSError:
            pass
    return total


def transforms(kind: str = "train"):
    import torchvision.transforms as T

    if kind == "eval":
        crop = [T.Resize(256), T.CenterCrop(224)]
    else:
        crop = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
    return T.Compose([
        *crop,
        T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])


class S3Images:
    """The "many small files" layout: one GET per image."""

    def __init__(self, bucket: str, keys: list, endpoint: str) -> None:
        self.bucket, self.keys, self.endpoint = bucket, keys, endpoint
        self.transform = transforms()
        self.client = None

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int):
        import io

        import boto3
        from PIL import Image

        if self.client is None:  # one client per worker process
            self.client = boto3.client("s3", endpoint_url=self.endpoint)
        body = self.client.get_object(Bucket=self.bucket, Key=self.keys[i])["Body"].read()
        image = Image.open(io.BytesIO(body)).convert("RGB")
        label = int(self.keys[i].split("/")[-2].rsplit("_", 1)[-1])
        return self.transform(image), label


def epochs(args):
    """The contender's epochs, each an iterable of batches."""
    if args.contender == "tributary":
        import tributary

        options = {}
        if args.endpoint:
            options = dict(aws_endpoint=args.endpoint, aws_allow_http="true")
        layout = "NHWC" if args.dtype == "uint8" else "NCHW"
        loader = tributary.Loader(args.dataset, batch_size=64, image_size=224,
                                  epochs=args.epochs, decode_threads=args.threads,
                                  storage_options=options, transform=args.transform,
                                  shuffle=args.transform == "train",
                                  dtype=args.dtype, layout=layout,
                                  **({"fields": args.fields.split(",")} if args.fields else {}))
        for _ in range(args.epochs):
            yield loader
        return
    import torch.utils.data
    if args.contender == "hf-datasets":
        yield from hf_datasets(args)
        return
    import torchvision

    torch.set_num_threads(1)
    if args.contender == "torch-folder":
        dataset = torchvision.datasets.ImageFolder(args.images, transform=transforms(args.transform))
    else:
        with open(args.keys) as f:
            dataset = S3Images(args.bucket, f.read().split(), args.endpoint)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=args.transform == "train",
                                         num_workers=args.workers, persistent_workers=True)
    for _ in range(args.epochs):
        yield loader


def hf_datasets(args):
    """Hugging Face `datasets` streaming the Parquet files, decoded with PIL
    and transformed by torchvision in the DataLoader's workers."""
    import datasets
    import torch.utils.data

    torch.set_num_threads(1)
    dataset = datasets.load_dataset("parquet", data_files=args.parquet, split="train", streaming=True)
    if not isinstance(dataset.features["image"], datasets.Image):  # no `huggingface` metadata
        dataset = dataset.cast_column("image", datasets.Image())
    transform = transforms(args.transform)

    def prepare(example):
        return {"image": transform(example["image"].convert("RGB")), "label": example["label"]}

    if args.transform == "train":
        dataset = dataset.shuffle(seed=0, buffer_size=1024)
    dataset = dataset.map(prepare)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=args.workers,
                                         persistent_workers=True)
    for epoch in range(args.epochs):
        dataset.set_epoch(epoch)
        yield ((batch["image"], batch["label"]) for batch in loader)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("contender", choices=["torch-folder", "torch-s3", "tributary", "hf-datasets"])
    p.add_argument("--images", help="ImageFolder directory (torch-folder)")
    p.add_argument("--bucket", help="bucket of the per-image objects (torch-s3)")
    p.add_argument("--keys", help="file listing the per-image keys (torch-s3)")
    p.add_argument("--dataset", help="Tributary dataset URL (tributary)")
    p.add_argument("--endpoint", help="S3 endpoint URL")
    p.add_argument("--fields", help="Tributary's fields, comma-separated (e.g. image,label)")
    p.add_argument("--parquet", nargs="+", help="Parquet files (hf-datasets)")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--threads", type=int, default=None, help="Tributary decode threads")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--transform", choices=["train", "eval"], default="train",
                   help="the preset: train (random crop, flip, shuffled) or eval "
                        "(resize 256, center crop 224, in order); not torch-s3")
    p.add_argument("--dtype", choices=["float32", "uint8"], default="float32",
                   help="Tributary's output: float32 NCHW normalised, or uint8 NHWC")
    p.add_argument("--label", default="", help="name of the row, copied to the output")
    p.add_argument("--watch", type=int, nargs="*", default=[],
                   help="other processes (the S3 server, the proxy) whose CPU time to report")
    args = p.parse_args()
    if args.transform != "train" and args.contender == "torch-s3":
        p.error("--transform eval: torch-folder, tributary or hf-datasets")
    if args.dtype != "float32" and args.contender != "tributary":
        p.error("--dtype uint8: tributary only")
    shape = (224, 224, 3) if args.dtype == "uint8" else (3, 224, 224)

    rss = PeakRss()
    watched = cpu_seconds(args.watch)
    own = cpu_seconds([os.getpid()])
    started = time.perf_counter()
    first, samples, rss_after_epoch, progress = None, 0, [], []
    for epoch in epochs(args):
        for images, labels in epoch:
            assert tuple(images.shape[1:]) == shape, images.shape
            samples += len(labels)
            if first is None:
                first = time.perf_counter() - started
            if not rss_after_epoch:
                progress.append((time.perf_counter(), samples))
        rss_after_epoch.append(rss.epoch_peak())
    seconds = time.perf_counter() - started
    steady = window_rate(progress, 0.5, 0.8)
    print(json.dumps({
        "label": args.label, "contender": args.contender, "transform": args.transform,
        "dtype": str(images.dtype), "samples": samples, "seconds": round(seconds, 2),
        "samples_per_s": round(steady, 1), "overall_samples_per_s": round(samples / seconds, 1),
        "first_batch_s": round(first, 3),
        "peak_rss_mib": round(rss.stop()), "peak_rss_each_epoch_mib": rss_after_epoch,
        "cpu_s": round(cpu_seconds([os.getpid()]) - own, 2),
        "watched_cpu_s": round(cpu_seconds(args.watch) - watched, 2),
    }), flush=True)


if __name__ == "__main__":
    main()
