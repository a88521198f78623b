"""Parquet datasets read in place, from files `pyarrow` writes: a Hugging
Face-style image dataset (an `Image` struct column and a `ClassLabel`) read
back pixel for pixel, a text corpus with a pre-tokenized `list<int32>`
column, row groups of different sizes in files with and without a page
index, shuffled ranks that read every row once, a mix with tar shards, the
shard cache, and the errors a truncated, corrupted or replaced file gives."""

import io
import json
import pathlib
import shutil
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import tributary
from conftest import tributary_bin, write_webdataset

CLASSES = ["cat", "dog", "eel"]


def png(pixels):
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def pixels_of(i):
    rng = np.random.default_rng(i)
    return rng.integers(0, 255, (8 + i % 5, 12, 3), dtype=np.uint8)


def hf_metadata():
    features = {
        "image": {"_type": "Image"},
        "label": {"names": CLASSES, "_type": "ClassLabel"},
    }
    return {b"huggingface": json.dumps({"info": {"features": features}}).encode()}


def index(directory, *args):
    return subprocess.run([tributary_bin(), "index", str(directory), *args],
                          capture_output=True, text=True)


# Rows of each file, its row group size and whether it has a page index.
FILES = [(50, 7, True), (30, 30, False), (11, 4, True)]
ROWS = sum(rows for rows, _, _ in FILES)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """An HF-layout dataset: data/train-0000N-of-00003.parquet, PNG images
    in `{bytes, path}` structs, ClassLabel labels, small data pages."""
    root = tmp_path_factory.mktemp("hub") / "data"
    root.mkdir()
    first = 0
    for f, (rows, group, page_index) in enumerate(FILES):
        ids = range(first, first + rows)
        table = pa.table({
            "image": [{"bytes": png(pixels_of(i)), "path": f"{i}.png"} for i in ids],
            "label": pa.array([i % 3 for i in ids], pa.int64()),
        }).replace_schema_metadata(hf_metadata())
        pq.write_table(table, root / f"train-{f:05d}-of-00003.parquet", row_group_size=group,
                       write_page_index=page_index, data_page_size=1024)
        first += rows
    done = index(root)
    assert done.returncode == 0, done.stderr
    assert "3 Parquet files, 91 rows" in done.stdout and "3 classes" in done.stdout, done.stdout
    inspected = subprocess.run([tributary_bin(), "inspect", str(root)], capture_output=True,
                               text=True)
    assert "verified     3 of 3 shards" in inspected.stdout, inspected.stdout + inspected.stderr
    return str(root)


def read_rows(url, **kwargs):
    """{id: (pixels, label)} of one unshuffled epoch."""
    loader = tributary.Loader(url, fields=["image", "label"], transform="none", dtype="uint8",
                              layout="NHWC", shuffle=False, batch_size=8, return_ids=True,
                              **kwargs)
    out = {}
    for images, labels, ids in loader:
        for image, label, i in zip(images, labels, ids):
            assert int(i) not in out
            out[int(i)] = (np.array(image), int(label))
    return out


def test_a_hub_style_image_dataset_reads_back_exactly_from_struct_images_and_class_labels(hub):
    manifest = json.loads((pathlib.Path(hub) / "manifest.json").read_text())
    assert manifest["version"] == 3 and manifest["classes"] == CLASSES
    assert [s["row_groups"] for s in manifest["shards"]] == [
        [7] * 7 + [1], [30], [4, 4, 3]], "row groups of different sizes"
    kinds = {c["name"]: c["kind"] for c in manifest["columns"]}
    assert kinds == {"image": "image", "label": "label"}
    rows = read_rows(hub)
    assert sorted(rows) == list(range(ROWS))
    for i, (image, label) in rows.items():
        assert (image == pixels_of(i)).all(), f"row {i}: pixels differ"
        assert label == i % 3


def test_without_fields_a_parquet_dataset_reads_all_its_columns(hub):
    loader = tributary.Loader(hub, image_size=16, batch_size=13, shuffle=False)
    images, labels = next(iter(loader))
    assert images.shape == (13, 3, 16, 16) and labels.tolist() == [i % 3 for i in range(13)]


def test_shuffled_epochs_read_every_row_once_each_in_a_new_order(hub):
    loader = tributary.Loader(hub, fields=["image", "label"], image_size=8, batch_size=5,
                              seed=7, epochs=2, return_ids=True)
    orders = []
    for _ in range(2):
        seen = []
        for _images, labels, ids in loader:
            assert labels.tolist() == [int(i) % 3 for i in ids], "each row's own label"
            seen.extend(int(i) for i in ids)
        assert sorted(seen) == list(range(ROWS)), "every row once"
        orders.append(seen)
    assert orders[0] != orders[1]


def test_a_second_epoch_reads_from_the_shard_cache(hub, tmp_path):
    cache = tmp_path / "cache"
    first = read_rows(hub, cache_dir=str(cache), cache_limit=1 << 30)
    files = [p for p in (cache / "entries").iterdir()]
    assert len(files) == len(FILES), files
    second = read_rows(hub, cache_dir=str(cache), cache_limit=1 << 30)
    assert sorted(first) == sorted(second) == list(range(ROWS))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A text corpus with a pre-tokenized column: nulls, empty lists and
    lists of different lengths, in two files."""
    root = tmp_path_factory.mktemp("corpus")
    docs = []
    for f in range(2):
        texts, ids, scores = [], [], []
        for i in range(f * 40, f * 40 + 40):
            texts.append(None if i % 17 == 5 else f"document {i}: héllo {'x' * (i % 9)}")
            ids.append(None if i % 13 == 4 else list(range(i, i + i % 6)))
            scores.append(i / 4)
            docs.append((texts[-1], ids[-1], scores[-1]))
        table = pa.table({"text": pa.array(texts, pa.string()),
                          "input_ids": pa.array(ids, pa.list_(pa.int32())),
                          "score": pa.array(scores, pa.float64())})
        pq.write_table(table, root / f"part-{f}.parquet", row_group_size=9 + f * 8,
                       write_page_index=f == 0, compression="zstd" if f else "snappy")
    done = index(root, "--format", "parquet")
    assert done.returncode == 0, done.stderr
    return str(root), docs


def test_a_text_corpus_reads_strings_token_lists_and_floats_with_nulls(corpus):
    url, docs = corpus
    loader = tributary.Loader(url, fields=["text?", "input_ids?", "score"], shuffle=False,
                              batch_size=6, return_ids=True)
    seen = 0
    for texts, ids, scores, rows in loader:
        for text, tokens, score, row in zip(texts, ids, scores, rows):
            want_text, want_ids, want_score = docs[int(row)]
            assert text == want_text
            assert tokens.dtype == np.int32
            assert tokens.tolist() == (want_ids or []), f"row {row}"
            assert score == want_score
            seen += 1
    assert seen == len(docs)


def test_a_parquet_source_mixes_with_tar_shards(hub, tmp_path):
    tar_samples = [(f"t/{i}", {"jpg": png(pixels_of(1000 + i)), "cls": b"1"}) for i in range(12)]
    tars = write_webdataset(tmp_path, [tar_samples[:6], tar_samples[6:]])
    loader = tributary.Loader([tributary.Source(hub), tributary.Source(tars)],
                              fields=["jpg;image", "cls;label"], image_size=8, batch_size=10,
                              return_sources=True, epochs=1, seed=3)
    sources = []
    for images, labels, batch_sources in loader:
        assert images.shape[1:] == (3, 8, 8)
        sources.extend(batch_sources.tolist())
    assert sources.count(0) == ROWS and sources.count(1) == 12


def copy(hub, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(hub, out)
    return out


def test_a_truncated_file_is_an_error_naming_it(hub, tmp_path):
    out = copy(hub, tmp_path)
    victim = out / "train-00001-of-00003.parquet"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    done = index(out, "--force")
    assert done.returncode != 0
    assert "train-00001-of-00003.parquet" in done.stderr and "PAR1" in done.stderr, done.stderr


def test_a_corrupted_footer_is_an_error_naming_it(hub, tmp_path):
    out = copy(hub, tmp_path)
    victim = out / "train-00002-of-00003.parquet"
    data = bytearray(victim.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for at in range(len(data) - 8 - footer, len(data) - 8, 3):
        data[at] ^= 0x5A
    victim.write_bytes(bytes(data))
    done = index(out, "--force")
    assert done.returncode != 0
    assert "train-00002-of-00003.parquet" in done.stderr and "footer" in done.stderr, done.stderr
    # A footer that claims more bytes than the file has.
    data = bytearray(victim.read_bytes())
    data[-8:-4] = (len(data) * 2).to_bytes(4, "little")
    victim.write_bytes(bytes(data))
    done = index(out, "--force")
    assert "claims" in done.stderr and "train-00002" in done.stderr, done.stderr


def test_a_file_replaced_after_indexing_is_an_error_naming_it(hub, tmp_path):
    out = copy(hub, tmp_path)
    victim = out / "train-00000-of-00003.parquet"
    table = pq.read_table(victim)
    pq.write_table(table, victim, row_group_size=5)
    with pytest.raises(Exception) as error:
        read_rows(str(out))
    message = str(error.value)
    assert "train-00000-of-00003.parquet" in message and "index the dataset again" in message


def test_a_field_naming_no_column_lists_the_columns(hub):
    with pytest.raises(Exception) as error:
        next(iter(tributary.Loader(hub, fields=["image", "caption"], batch_size=4)))
    message = str(error.value)
    assert "caption" in message and "label (int64)" in message, message


def test_a_parquet_text_column_packs_into_token_shards(corpus, tmp_path):
    url, docs = corpus
    out = tmp_path / "tokens"
    done = subprocess.run([tributary_bin(), "pack", url, str(out), "--tokenizer", "bytes"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    texts = [text for text, _, _ in docs if text is not None]
    tokens = sum(len(t.encode()) + 1 for t in texts)
    assert f"packed {len(texts)} documents, {tokens} tokens" in done.stdout, done.stdout
    loader = tributary.Loader(str(out), sequence_length=16, packing="none", batch_size=8,
                              shuffle=False, fields=["input_ids"])
    rows = sum(len(batch[0]) for batch in loader)
    assert rows == len(texts), "one row a document"


def test_nested_columns_read_as_python_values(tmp_path):
    rows = [{"meta": {"w": i, "tags": ["a", "b"][: i % 3]}, "words": [f"w{i}", None][: 1 + i % 2]}
            for i in range(14)]
    rows[5]["meta"] = None
    table = pa.table({"meta": pa.array([r["meta"] for r in rows],
                                       pa.struct([("w", pa.int64()), ("tags", pa.list_(pa.string()))])),
                      "words": pa.array([r["words"] for r in rows], pa.list_(pa.string()))})
    pq.write_table(table, tmp_path / "nested.parquet", row_group_size=4, write_page_index=True)
    done = index(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "meta (struct<w: int64, tags: list<string>>: json)" in done.stdout, done.stdout
    loader = tributary.Loader(str(tmp_path), fields=["meta?", "words"], shuffle=False,
                              batch_size=3, return_ids=True)
    seen = 0
    for metas, words, ids in loader:
        for meta, word, i in zip(metas, words, ids):
            assert meta == rows[int(i)]["meta"], f"row {i}"
            assert word == rows[int(i)]["words"], f"row {i}"
            seen += 1
    assert seen == 14


def test_a_hub_style_image_dataset_packs_into_tar_shards(hub, tmp_path):
    out = tmp_path / "shards"
    done = subprocess.run([tributary_bin(), "pack", hub, str(out), "--max-samples", "40"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["samples"] == ROWS and manifest["classes"] == CLASSES
    assert manifest["fields"] == ["cls", "png"], manifest["fields"]
    loader = tributary.Loader(str(out), fields=["image", "cls"], transform="none", dtype="uint8",
                              layout="NHWC", shuffle=False, batch_size=8, return_ids=True)
    seen = 0
    for images, labels, ids in loader:
        for image, label, i in zip(images, labels, ids):
            i = int(i)  # packed in file and row order
            assert (np.array(image) == pixels_of(i)).all() and label == i % 3, i
            seen += 1
    assert seen == ROWS
