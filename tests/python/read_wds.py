"""Read shards with the `webdataset` library and print `key<TAB>cls` lines.

Usage: read_wds.py SHARD [SHARD ...]
"""

import sys

import webdataset as wds


def main() -> None:
    for sample in wds.WebDataset(sys.argv[1:], shardshuffle=False):
        image = sample.get("jpg", sample.get("png"))
        assert image is not None and len(image) > 0, f"{sample['__key__']}: no image bytes"
        print(f"{sample['__key__']}\t{int(sample['cls'])}")


if __name__ == "__main__":
    main()
