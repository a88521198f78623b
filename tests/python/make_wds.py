"""Write WebDataset shards with the `webdataset` library itself.

Usage: make_wds.py IMAGE_FOLDER OUT_DIR SAMPLES_PER_SHARD

Each sample gets `jpg`/`png` (the image bytes), `cls` (class index) and
`json` (a small dict), the way WebDataset users write ImageNet shards.
Prints the number of samples written.
"""

import json
import os
import sys

import webdataset as wds


def main() -> None:
    src, out, per_shard = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    count = 0
    with wds.ShardWriter(os.path.join(out, "wds-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
        for label, name in enumerate(classes):
            for file in sorted(os.listdir(os.path.join(src, name))):
                stem, ext = os.path.splitext(file)
                with open(os.path.join(src, name, file), "rb") as f:
                    data = f.read()
                sink.write({
                    "__key__": f"{name}/{stem}",
                    ext.lstrip(".").lower(): data,
                    "cls": label,
                    "json": {"class": name, "file": file},
                })
                count += 1
    print(count)


if __name__ == "__main__":
    main()
