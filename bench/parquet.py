"""The Parquet benchmark's helpers (bench/parquet.sh runs them).

    python bench/parquet.py write IMAGES_DIR OUT [--files N] [--row-group R]
    python bench/parquet.py table RESULTS.jsonl --cores N

`write` puts the images of an ImageFolder directory (what `tributary synth`
writes: class_000/000000.jpg, ...) into Parquet files laid out as the
Hugging Face Hub has them: OUT/data/train-0000i-of-0000N.parquet, an `image`
struct column {bytes: binary, path: string} and an int64 `label`, the
`huggingface` schema metadata naming their features (Image, ClassLabel with
the class directories' names), row groups of R rows (100 by default, what
`datasets` writes for image datasets) and a page index. The rows are in the
order `tributary pack` packs the same images (the sorted paths), the labels
the class directories' indices in sorted order, as pack gives them.

`table` prints the contenders' JSON lines (bench/contenders.py) as one
table: the median and the min-max over the rounds of each row's steady
samples/s, first batch, CPU-milliseconds per image (the process and its
children) and peak RSS, and the ratios Parquet / tar shards and Parquet /
`datasets` + DataLoader, each the median (and min-max) of the ratios taken
within one round.
"""

import argparse
import json
import os
import statistics
from collections import defaultdict


def write(args) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    classes = sorted(d for d in os.listdir(args.images) if os.path.isdir(os.path.join(args.images, d)))
    rows = [(os.path.join(c, name), label)
            for label, c in enumerate(classes)
            for name in sorted(os.listdir(os.path.join(args.images, c)))]
    features = {"image": {"_type": "Image"},
                "label": {"names": classes, "_type": "ClassLabel"}}
    metadata = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    schema = pa.schema([
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("label", pa.int64()),
    ], metadata=metadata)
    os.makedirs(os.path.join(args.out, "data"), exist_ok=True)
    files = min(args.files, len(rows))
    total = 0
    for f in range(files):
        part = rows[len(rows) * f // files:len(rows) * (f + 1) // files]
        images = []
        for path, _ in part:
            with open(os.path.join(args.images, path), "rb") as data:
                images.append({"bytes": data.read(), "path": os.path.basename(path)})
        table = pa.table({"image": pa.array(images, schema.field("image").type),
                          "label": pa.array([label for _, label in part], pa.int64())},
                         schema=schema)
        name = os.path.join(args.out, "data", f"train-{f:05d}-of-{files:05d}.parquet")
        pq.write_table(table, name, row_group_size=args.row_group, write_page_index=True,
                       compression=args.compression)
        total += os.path.getsize(name)
    print(f"wrote {len(rows)} rows in {files} Parquet files, row groups of {args.row_group}, "
          f"{args.compression}, "
          f"{total / 1e6:.1f} MB, to {args.out}/data")


LABELS = {
    "parquet": "Tributary Loader, Parquet (image struct + label)",
    "tar": "Tributary Loader, tar shards",
    "datasets": "`datasets` streaming Parquet + DataLoader",
    "folder": "DataLoader, ImageFolder (the run.sh baseline)",
}


def table(args) -> None:
    rows = defaultdict(list)
    with open(args.results) as f:
        for line in f:
            row = json.loads(line)
            rows[row["label"]].append(row)

    def spread(values, fmt) -> str:
        return (f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"
                if len(values) > 1 else fmt(values[0]))

    def rate(label):
        return [r["samples_per_s"] for r in rows[label]]

    def ratio(label, base) -> str:
        pairs = [a / b for a, b in zip(rate(label), rate(base))]
        return spread(pairs, lambda x: f"{x:.2f}x") if pairs else "-"

    rounds = max((len(v) for v in rows.values()), default=0)
    print(f"\n{args.cores} cores; {rounds} rounds; median (min-max over the rounds)\n")
    print("| contender | samples/s (steady) | first batch | CPU ms / image | peak RSS | Parquet / this |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, name in LABELS.items():
        if not rows[label]:
            continue
        print(f"| {name} | {spread(rate(label), lambda x: f'{x:.1f}')} "
              f"| {spread([r['first_batch_s'] for r in rows[label]], lambda x: f'{x:.2f} s')} "
              f"| {spread([1e3 * r['cpu_s'] / r['samples'] for r in rows[label]], lambda x: f'{x:.2f}')} "
              f"| {spread([r['peak_rss_mib'] for r in rows[label]], lambda x: f'{x:.0f} MiB')} "
              f"| {'1.00x' if label == 'parquet' else ratio('parquet', label)} |")
    if rows["parquet"] and rows["tar"] and rows["datasets"]:
        tar = [a / b for a, b in zip(rate("parquet"), rate("tar"))]
        hf = [a / b for a, b in zip(rate("parquet"), rate("datasets"))]
        print(f"\ntargets: Parquet within 10% of tar shards: "
              f"{'met' if statistics.median(tar) >= 0.9 else 'NOT met'} "
              f"(median {statistics.median(tar):.2f}x); Parquet >= 3x `datasets` + DataLoader: "
              f"{'met' if statistics.median(hf) >= 3 else 'NOT met'} (median {statistics.median(hf):.2f}x)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="an ImageFolder directory as HF-style Parquet files")
    w.add_argument("images")
    w.add_argument("out")
    w.add_argument("--files", type=int, default=8)
    w.add_argument("--row-group", type=int, default=100)
    w.add_argument("--compression", default="snappy",
                   help="pyarrow's compression: snappy (its default and `datasets`'), none, zstd")
    t = sub.add_parser("table", help="the table of the contenders' JSON lines")
    t.add_argument("results")
    t.add_argument("--cores", type=int, required=True)
    args = p.parse_args()
    write(args) if args.command == "write" else table(args)


if __name__ == "__main__":
    main()
