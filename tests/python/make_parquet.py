"""Write an image folder as a Hugging Face-style Parquet dataset with pyarrow.

Usage: make_parquet.py IMAGE_FOLDER OUT_DIR ROWS_PER_FILE ROWS_PER_GROUP

Files `train-0000N-of-0000M.parquet` with columns `image` (the Hub's
`Image` struct: `{bytes, path}`), `label` (int64, a `ClassLabel` in the
`huggingface` metadata), `caption` (a string) and `blob` (20 KB of
incompressible bytes a row, which a reader of the other columns must not
fetch); every other file has a page index. Prints JSON: the rows written and,
per file, its size and the byte ranges of its `blob` column chunks.
"""

import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    per_file, per_group = int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(out, exist_ok=True)
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    rows = []
    for label, name in enumerate(classes):
        for file in sorted(os.listdir(os.path.join(src, name))):
            with open(os.path.join(src, name, file), "rb") as f:
                rows.append((f"{name}/{file}", f.read(), label))
    features = {"image": {"_type": "Image"},
                "label": {"names": classes, "_type": "ClassLabel"},
                "caption": {"dtype": "string", "_type": "Value"},
                "blob": {"dtype": "binary", "_type": "Value"}}
    metadata = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    rng = np.random.default_rng(0)
    count = (len(rows) + per_file - 1) // per_file
    report = {"rows": len(rows), "files": {}}
    for f in range(count):
        part = rows[f * per_file:(f + 1) * per_file]
        table = pa.table({
            "image": [{"bytes": data, "path": path} for path, data, _ in part],
            "label": pa.array([label for _, _, label in part], pa.int64()),
            "caption": [f"a photo of {path}" for path, _, _ in part],
            "blob": [rng.bytes(20_000) for _ in part],
        }).replace_schema_metadata(metadata)
        name = f"train-{f:05d}-of-{count:05d}.parquet"
        path = os.path.join(out, name)
        pq.write_table(table, path, row_group_size=per_group, write_page_index=f % 2 == 0)
        meta = pq.ParquetFile(path).metadata
        blob = []
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                column = meta.row_group(g).column(c)
                if column.path_in_schema == "blob":
                    start = column.dictionary_page_offset or column.data_page_offset
                    start = min(start, column.data_page_offset)
                    blob.append([start, start + column.total_compressed_size])
        report["files"][name] = {"size": os.path.getsize(path), "blob": blob}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
