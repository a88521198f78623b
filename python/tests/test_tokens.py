"""Token datasets from Python: a JSONL corpus packed with the byte-level
tokenizer (`tributary pack --tokenizer bytes`), read as fixed-length rows
with each packing mode; what a batch holds is checked position by
position, a checkpoint resumes with every row once, and data-parallel
groups under torchrun train every row (so every token) once across a kill
and a DP=2 -> DP=1 restart."""

import json
import subprocess

import numpy as np
import pytest

import tributary
from conftest import tributary_bin

EOS = 256  # the byte tokenizer's end-of-document id
L = 16


def documents(n, seed):
    rng = np.random.default_rng(seed)
    words = ["tok", "ens", "rows", "pack", "the", "a", "model", "learns", "every", "window"]
    return [" ".join(rng.choice(words, size=int(rng.integers(1, 12)))) for _ in range(n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """300 short documents packed into token shards of about 2,000 tokens;
    the dataset's URL and the documents' token ids (eos appended)."""
    root = tmp_path_factory.mktemp("tokens")
    texts = documents(300, 5)
    with open(root / "corpus.jsonl", "w") as f:
        for text in texts:
            f.write(json.dumps({"text": text}) + "\n")
    out = root / "ds"
    subprocess.run([tributary_bin(), "pack", str(root / "corpus.jsonl"), str(out),
                    "--tokenizer", "bytes", "--shard-tokens", "2000"],
                   check=True, capture_output=True)
    docs = [list(t.encode()) + [EOS] for t in texts]
    return str(out), docs


def rows_of(url, **kwargs):
    loader = tributary.Loader(url, sequence_length=L, batch_size=4, epochs=1, return_ids=True,
                              fields=["input_ids", "labels", "position_ids", "document_ids",
                                      "attention_mask"], **kwargs)
    out = []
    for batch in loader:
        ids = batch.ids
        out.append((batch, ids))
    return out


def test_concat_rows_are_windows_across_documents_with_positions_restarting_after_each_eos(corpus):
    url, docs = corpus
    total = 0
    for batch, ids in rows_of(url, packing="concat"):
        inputs, labels, positions, doc_ids, mask = batch[:5]
        assert inputs.shape == (len(ids), L) and inputs.dtype == np.int64
        assert (labels[:, :-1] == inputs[:, 1:]).all(), "labels are the inputs shifted by one"
        assert mask.all(), "concat rows have no padding"
        for row in range(len(ids)):
            for i in range(1, L):
                starts = inputs[row, i - 1] == EOS
                assert (positions[row, i] == 0) == starts, (row, i)
                assert doc_ids[row, i] == doc_ids[row, i - 1] + int(starts)
        total += len(ids)
    tokens = sum(len(d) for d in docs)
    # Every shard but its tail (< L + 1 tokens) is cut into windows.
    assert tokens - total * L < 20 * (L + 1), (tokens, total)


def test_bestfit_never_cuts_a_document_that_fits_and_labels_padding_minus_100(corpus):
    url, docs = corpus
    seen_tokens = 0
    for batch, ids in rows_of(url, packing="bestfit", token_dtype="int32"):
        inputs, labels, positions, doc_ids, mask = batch[:5]
        assert inputs.dtype == np.int32
        for row in range(len(ids)):
            n = int(mask[row].sum())
            assert (labels[row, n - 1:] == -100).all(), "the last token and the padding train nothing"
            assert (doc_ids[row, n:] == -1).all()
            seen_tokens += n
            starts = [i for i in range(n) if positions[row, i] == 0] + [n]
            for start, end in zip(starts, starts[1:]):
                assert (positions[row, start:end] == np.arange(end - start)).all()
                assert (labels[row, start:end - 1] == inputs[row, start + 1:end]).all()
                assert labels[row, end - 1] == -100, "no label across a document's end"
                if end - start < L:
                    # A piece shorter than a row is a whole document (or
                    # the last piece of a longer one): it ends with EOS.
                    assert inputs[row, end - 1] == EOS, (row, start, end)
    assert seen_tokens == sum(len(d) for d in docs), "every token once"


def test_none_pads_or_truncates_one_document_per_row(corpus):
    url, docs = corpus
    lengths = sorted(min(len(d), L) for d in docs)
    got = []
    for batch, ids in rows_of(url, packing="none", shuffle_buffer=1):
        mask = batch[4]
        got.extend(int(m.sum()) for m in mask)
    assert sorted(got) == lengths


def test_a_token_checkpoint_resumes_with_every_row_once(corpus):
    url, _ = corpus
    loader = tributary.Loader(url, sequence_length=L, batch_size=4, epochs=1, return_ids=True)
    first = []
    for step, batch in enumerate(loader):
        first.extend(batch.ids.tolist())
        if step == 4:
            state = loader.state_dict()
            break
    assert state["samples"] == 20
    again = tributary.Loader(url, sequence_length=L, batch_size=4, epochs=1, return_ids=True)
    again.load_state_dict(state)
    rest = [i for batch in again for i in batch.ids.tolist()]
    whole = [i for batch in tributary.Loader(url, sequence_length=L, batch_size=4, epochs=1,
                                             return_ids=True) for i in batch.ids.tolist()]
    assert sorted(first + rest) == sorted(whole), "every row of the epoch once"


def test_keywords_are_checked_and_name_themselves(corpus, dataset):
    url, _ = corpus
    with pytest.raises(ValueError, match="give sequence_length"):
        tributary.Loader(url, batch_size=4)
    with pytest.raises(ValueError, match="packing"):
        tributary.Loader(url, sequence_length=L, packing="zigzag")
    with pytest.raises(ValueError, match="needs sequence_length"):
        tributary.Loader(url, packing="bestfit")
    with pytest.raises(ValueError, match="sequence_length"):
        tributary.Loader(url, sequence_length=0)
    with pytest.raises(ValueError, match="is a sample dataset"):
        tributary.Loader(dataset, sequence_length=L)
    with pytest.raises(ValueError, match="not a column of a token batch"):
        tributary.Loader(url, sequence_length=L, fields=["image"])


def test_tp2_dp2_token_groups_then_a_kill_and_dp1_restart_train_every_window_once(corpus,
                                                                                  tmp_path):
    """The data-parallel run of test_data_parallel on the token corpus: the
    tensor-parallel peers' token batches byte-identical, the groups'
    windows disjoint, and across the kill and the DP=1 restart every window
    (so every token but the shards' tails) trained exactly once."""
    pytest.importorskip("torch")
    from test_data_parallel import kill_and_resize

    url, _ = corpus
    loader = {"sequence_length": L, "batch_size": 4, "seed": 7, "epochs": 1,
              "decode_threads": 1}
    rows = sum(len(b.ids) for b in tributary.Loader(url, return_ids=True, **loader))
    run = tmp_path / "run"
    run.mkdir()
    committed, discarded = kill_and_resize(run, url, loader, samples=rows)
    assert discarded > 0, "the killed run trained past its last commit"
