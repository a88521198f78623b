"""bench/tokens.py stays runnable and its Megatron-style baseline reads the
windows it claims: a small dataset, each contender for a few batches, and
the baseline's rows against a reconstruction from the plain token stream."""

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

pytest.importorskip("torch")
BENCH = REPO / "bench" / "tokens.py"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "tokens"
    subprocess.run([sys.executable, str(BENCH), "dataset", str(path), "--tokens", "300000",
                    "--shard-tokens", "100000"], check=True, capture_output=True)
    return path


def test_bench_tokens_megatron_style_rows_are_windows_of_the_shuffled_documents(dataset):
    sys.path.insert(0, str(REPO / "bench"))
    import tokens

    length = 64
    data = tokens.MegatronStyle(str(dataset), length, seed=0)
    manifest = json.loads((dataset / "manifest.json").read_text())
    shards = [np.fromfile(dataset / s["name"], "<u2") for s in manifest["shards"]]
    # The stream: every document in the document index's order.
    stream = np.concatenate([shards[s][b:b + n] for s, b, n in
                             zip(data.doc_shard, data.doc_start, data.doc_len)]).astype(np.int64)
    assert len(data) == (len(stream) - 1) // length
    for i in (0, 1, len(data) // 2, len(data) - 1):
        start = int(data.sample_start[data.shuffle[i]])
        window = stream[start:start + length + 1]
        input_ids, labels, position_ids, document_ids = data[i]
        assert (input_ids == window[:-1]).all() and (labels == window[1:]).all()
        # Positions restart after each end of document, document ids count them.
        ends = np.flatnonzero(window[:-1] == manifest["eos_id"])
        for end in ends[ends < length - 1]:
            assert position_ids[end + 1] == 0
            assert document_ids[end + 1] == document_ids[end] + 1


@pytest.mark.parametrize("kind, flags", [("tributary", ["--threads", "1"]),
                                         ("megatron", ["--workers", "0"])])
def test_bench_tokens_contenders_report_their_figures(dataset, kind, flags):
    out = subprocess.run([sys.executable, str(BENCH), kind, str(dataset), "--name", kind,
                          "--length", "128", "--batch", "4", "--tokens", "20000", *flags],
                         check=True, capture_output=True, text=True).stdout
    figures = json.loads(out.splitlines()[-1])
    assert figures["tokens"] >= 20000 and figures["tokens_per_s"] > 0
    assert figures["cpu_s_per_mtok"] >= 0 and figures["first_batch_s"] > 0
