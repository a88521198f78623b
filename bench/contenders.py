"""One contender of the throughput comparison, run in a process of its own;
prints one JSON line: samples, seconds, samples/s after the first batch
(and overall), first batch latency, peak RSS, RSS after each epoch.

    python bench/contenders.py torch-folder  --images DIR  [--workers N]
    python bench/contenders.py torch-s3      --bucket B --keys FILE --endpoint URL [--workers N]
    python bench/contenders.py tributary     --dataset URL [--endpoint URL] [--threads N] [--epochs E]

Every contender makes RandomResizedCrop(224) + horizontal flip + normalise,
float32 N x 3 x 224 x 224, batches of 64, and reads every image once per
epoch. Peak RSS is the largest sum, over the process and its children (the
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
            self.peak = max(self.peak, self.now())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.now()) / 2**20


def transforms():
    import torchvision.transforms as T

    return T.Compose([
        T.RandomResizedCrop(224),
        T.RandomHorizontalFlip(),
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
            self.client = boto3.client(
                "s3", endpoint_url=self.endpoint, region_name="us-east-1",
                aws_access_key_id="bench", aws_secret_access_key="bench")
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
            options = dict(aws_endpoint=args.endpoint, aws_allow_http="true",
                           aws_region="us-east-1", aws_access_key_id="bench",
                           aws_secret_access_key="bench")
        loader = tributary.Loader(args.dataset, batch_size=64, image_size=224,
                                  epochs=args.epochs, decode_threads=args.threads,
                                  storage_options=options)
        for _ in range(args.epochs):
            yield loader
        return
    import torch.utils.data
    import torchvision

    torch.set_num_threads(1)
    if args.contender == "torch-folder":
        dataset = torchvision.datasets.ImageFolder(args.images, transform=transforms())
    else:
        with open(args.keys) as f:
            dataset = S3Images(args.bucket, f.read().split(), args.endpoint)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True,
                                         num_workers=args.workers, persistent_workers=True)
    for _ in range(args.epochs):
        yield loader


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("contender", choices=["torch-folder", "torch-s3", "tributary"])
    p.add_argument("--images", help="ImageFolder directory (torch-folder)")
    p.add_argument("--bucket", help="bucket of the per-image objects (torch-s3)")
    p.add_argument("--keys", help="file listing the per-image keys (torch-s3)")
    p.add_argument("--dataset", help="Tributary dataset URL (tributary)")
    p.add_argument("--endpoint", help="S3 endpoint URL")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--threads", type=int, default=None, help="Tributary decode threads")
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()

    rss = PeakRss()
    started = time.perf_counter()
    first, first_samples, samples, rss_after_epoch = None, 0, 0, []
    for epoch in epochs(args):
        for images, labels in epoch:
            assert tuple(images.shape[1:]) == (3, 224, 224), images.shape
            samples += len(labels)
            if first is None:
                first, first_samples = time.perf_counter() - started, samples
        rss_after_epoch.append(round(rss.now() / 2**20))
    seconds = time.perf_counter() - started
    # The rate once running: start-up (worker processes, imports) is the
    # first batch's latency, reported apart.
    steady = (samples - first_samples) / max(seconds - first, 1e-9)
    print(json.dumps({
        "contender": args.contender, "samples": samples, "seconds": round(seconds, 2),
        "samples_per_s": round(steady, 1), "overall_samples_per_s": round(samples / seconds, 1),
        "first_batch_s": round(first, 3),
        "peak_rss_mib": round(rss.stop()), "rss_after_each_epoch_mib": rss_after_epoch,
    }), flush=True)


if __name__ == "__main__":
    main()
