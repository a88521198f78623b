"""Prints bench/run.sh's table from the JSON lines its contenders wrote.

    python bench/table.py RESULTS.jsonl --cores N --rtt-ms MS

Rows measured in several rounds (decode-only, torch, local, remote, and the
eval preset's torch-eval and local-eval, the uint8 output's local-uint8) show
the median of their figures, and each ratio is the median of the ratios
taken within one round, so that drift in the machine's speed between rounds
does not enter a ratio.
"""

import argparse
import json
import statistics
from collections import defaultdict


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results")
    p.add_argument("--cores", type=int, required=True)
    p.add_argument("--rtt-ms", required=True)
    p.add_argument("--sample-bytes", type=float, help="mean size of a packed sample")
    args = p.parse_args()
    rows = defaultdict(list)
    with open(args.results) as f:
        for line in f:
            row = json.loads(line)
            rows[row["label"]].append(row)
    cores, rtt = args.cores, args.rtt_ms

    def rate(label: str) -> list:
        return [r["samples_per_s"] for r in rows[label]]

    def ratio(label: str, base: str, scale: float = 1.0) -> float:
        """Median over rounds of label / (base x scale), round by round."""
        pairs = zip(rate(label), rate(base))
        return statistics.median(a / (b * scale) for a, b in pairs)

    def median(label: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[label])

    rounds = len(rows["torch"])
    single = statistics.median(rate("decode-only"))
    print(f"\n{cores} cores; {rounds} rounds; decode-only (JPEG decode alone, 1 thread, "
          f"libjpeg-turbo): median {single:.1f} images/s, x {cores} cores = {single * cores:.1f}\n")
    print("| contender | samples/s (steady) | vs DataLoader | vs cores x decode-only "
          "| first batch | peak RSS | S3 server + proxy CPU |")
    print("|---|---|---|---|---|---|---|")

    def line(name: str, label: str, in_rounds: bool = False, torch: str = "torch") -> None:
        """A row; `torch` names the DataLoader row it is compared with."""
        if not rows[label]:
            return
        r = rows[label][0]
        samples = statistics.median(rate(label))
        if in_rounds:
            vs_torch = ratio(label, torch)
            vs_decode = ratio(label, "decode-only", cores)
        else:
            vs_torch = samples / statistics.median(rate(torch))
            vs_decode = samples / (single * cores)
        rss = f"{round(median(label, 'peak_rss_mib'))} MiB"
        if len(r["peak_rss_each_epoch_mib"]) > 1:
            rss += " (peak in each epoch: " + ", ".join(map(str, r["peak_rss_each_epoch_mib"])) + ")"
        server = median(label, "watched_cpu_s")
        seconds = median(label, "seconds")
        busy = f"{server:.1f} s of {seconds:.1f} s" if server > 0.05 else "-"
        print(f"| {name} | {samples:.1f} | {vs_torch:.2f}x | {vs_decode:.0%} | "
              f"{median(label, 'first_batch_s') * 1000:.0f} ms | {rss} | {busy} |")

    line(f"PyTorch DataLoader, ImageFolder, {cores} workers", "torch", True)
    line("Tributary, local shards", "local", True)
    line("Tributary, local shards packed --keep-jpeg-bytes (no restart markers)", "local-plain", True)
    line(f"Tributary, S3 +{rtt} ms", "remote", True)
    if rows["torch-s3"]:
        n = rows["torch-s3"][0]["samples"]
        line(f"PyTorch DataLoader, one GET per image (S3 +{rtt} ms), 2 workers, {n} images", "torch-s3")
    for t in (1, 2, 4, 8, 16):
        if t <= cores:
            line(f"Tributary, local, {t} decode thread{'s' if t > 1 else ''}", f"threads-{t}")
    line(f"Tributary, S3 +{rtt} ms, 1 decode thread", "remote-1")
    line("Tributary, local, 1 decode thread (beside the row above)", "local-1")
    line("Tributary, local, 3 epochs", "epochs")
    if rows["torch-eval"] and rows["local-eval"]:
        print("\nThe eval preset (Resize(256), CenterCrop(224), normalise; float32 N x 3 x 224 x 224, "
              "read in order):\n")
        print("| contender | samples/s (steady) | vs DataLoader | vs cores x decode-only "
              "| first batch | peak RSS | S3 server + proxy CPU |")
        print("|---|---|---|---|---|---|---|")
        line(f"PyTorch DataLoader, ImageFolder, torchvision eval transforms, {cores} workers",
             "torch-eval", True, "torch-eval")
        line('Tributary, local shards, transform="eval"', "local-eval", True, "torch-eval")
    if rows["local-uint8"]:
        print("\nThe train preset's output, Tributary, local shards:\n")
        print("| output | samples/s (steady) | vs float32 | peak RSS |")
        print("|---|---|---|---|")
        print(f"| float32 N x 3 x 224 x 224, normalised | {statistics.median(rate('local')):.1f} | 1.00x "
              f"| {round(median('local', 'peak_rss_mib'))} MiB |")
        print(f"| uint8 N x 224 x 224 x 3 (dtype=\"uint8\", layout=\"NHWC\") "
              f"| {statistics.median(rate('local-uint8')):.1f} | {ratio('local-uint8', 'local'):.2f}x "
              f"| {round(median('local-uint8', 'peak_rss_mib'))} MiB |")

    if args.sample_bytes:
        # Tributary's defaults: a shuffle buffer of 1024 samples, 128 MiB in
        # flight, 4 prefetched + 2 decoding + 1 held batch of 64 x 3 x 224 x 224 f32.
        batch = 64 * 3 * 224 * 224 * 4
        budget = 1024 * args.sample_bytes + (128 << 20) + 7 * batch
        print(f"\nTributary's RSS budget: shuffle buffer {1024 * args.sample_bytes / 2**20:.0f} MiB "
              f"+ in flight 128 MiB + 7 batches {7 * batch / 2**20:.0f} MiB = {budget / 2**20:.0f} MiB; "
              f"+ 150 MB = {(budget + 150e6) / 2**20:.0f} MiB")
    print()
    if rows["remote"] and rows["torch-s3"]:  # absent from a partial run's results
        print(f"remote / local, all cores: {ratio('remote', 'local'):.0%} (median of {rounds} rounds); "
              f"remote / per-image GETs: {statistics.median(rate('remote')) / rate('torch-s3')[0]:.1f}x")
    if rows["torch-eval"] and rows["local-eval"]:
        print(f"eval preset, Tributary / DataLoader: {ratio('local-eval', 'torch-eval'):.2f}x "
              f"(median of {len(rows['local-eval'])} rounds)")
    if rows["local-uint8"]:
        print(f"train preset, Tributary uint8 / float32: {ratio('local-uint8', 'local'):.2f}x "
              f"(median of {len(rows['local-uint8'])} rounds)")
    if rows["remote-1"] and rows["local-1"]:
        print(f"remote / local, 1 decode thread (a core left for the S3 server and proxy): "
              f"{rate('remote-1')[0] / rate('local-1')[0]:.0%}")


if __name__ == "__main__":
    main()
