"""Token-batch benchmark helpers (bench/tokens.sh runs them).

    python bench/tokens.py dataset DIR --tokens N      u16 Megatron shards + manifest
    python bench/tokens.py corpus FILE --documents N   a JSONL text corpus
    python bench/tokens.py tributary DIR --length L --batch B --tokens N
    python bench/tokens.py megatron DIR --length L --batch B --tokens N --workers W
    python bench/tokens.py tokenizers FILE --tokenizer tokenizer.json
    python bench/tokens.py table RESULTS.jsonl

Each contender runs in a process of its own and prints one JSON line: the
steady rate (tokens/s over the batches after the first, up to --tokens
tokens), CPU-seconds per million tokens over the same span (the process and
every descendant, e.g. DataLoader workers, from /proc), and the time from
start to the first batch (index building, workers' start-up included).
"""

import argparse
import json
import os
import struct
import sys
import time

import numpy as np

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds():
    """User + system CPU seconds of this process and all its descendants
    alive now (the descendants that exited are in RUSAGE_CHILDREN)."""
    import resource

    parents = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(pid)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK)
    mine, total, frontier = {os.getpid()}, 0.0, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        total += parents.get(pid, (0, 0.0))[1]
        for child, (ppid, _) in parents.items():
            if ppid == pid and child not in mine:
                mine.add(child)
                frontier.append(child)
    dead = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + dead.ru_utime + dead.ru_stime


def crc32c(data):
    table = []
    for n in range(256):
        for _ in range(8):
            n = (n >> 1) ^ (0x82F63B78 if n & 1 else 0)
        table.append(n)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def make_dataset(out, tokens, shard_tokens, vocab, seed):
    """u16 Megatron .bin/.idx shards of random documents (lengths
    log-normal around ~600 tokens, ids Zipf-like below ``vocab``, each
    ending with eos = vocab - 1) and a tributary-tokens manifest."""
    rng = np.random.default_rng(seed)
    os.makedirs(out, exist_ok=True)
    shards, left, eos = [], tokens, vocab - 1
    while left > 0:
        n = min(shard_tokens, left)
        lengths = []
        while sum(lengths) < n:
            lengths.extend(np.clip(rng.lognormal(6.0, 1.0, 4096), 2, 65536).astype(np.int64))
        lengths = np.asarray(lengths)
        lengths = lengths[np.cumsum(lengths) <= n]
        if n - lengths.sum() >= 2:  # the shard ends with a shorter document: exactly n tokens
            lengths = np.append(lengths, n - lengths.sum())
        data = (rng.zipf(1.2, int(lengths.sum())) % (vocab - 1)).astype("<u2")
        data[np.cumsum(lengths) - 1] = eos
        pointers = np.concatenate([[0], np.cumsum(lengths[:-1]) * 2]).astype("<i8")
        idx = (b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(lengths) + 1)
               + lengths.astype("<i4").tobytes() + pointers.tobytes()
               + np.arange(len(lengths) + 1, dtype="<i8").tobytes())
        name = f"shard-{len(shards):06d}"
        data.tofile(os.path.join(out, name + ".bin"))
        with open(os.path.join(out, name + ".idx"), "wb") as f:
            f.write(idx)
        shards.append({"name": name + ".bin", "bytes": data.nbytes, "offset": 0,
                       "tokens": int(lengths.sum()), "documents": len(lengths),
                       "index": {"name": name + ".idx", "bytes": len(idx), "crc32c": crc32c(idx)}})
        left -= int(lengths.sum())
    manifest = {"format": "tributary-tokens", "version": 1, "dtype": "u16", "eos_id": eos,
                "vocab_size": vocab, "tokens": sum(s["tokens"] for s in shards),
                "documents": sum(s["documents"] for s in shards),
                "bytes": sum(s["bytes"] for s in shards), "shards": shards}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    print(f"{manifest['tokens']} tokens, {manifest['documents']} documents, {len(shards)} shards")


def make_corpus(path, documents, seed):
    """JSONL documents of English-like words (a few hundred bytes each)."""
    rng = np.random.default_rng(seed)
    words = np.array("the of and to in a is that for it as was with be by on not he this are or "
                     "his from at which but have an they you were her she there been one all "
                     "would their we him has when who will more no if out so said what up its "
                     "about into than them can only other new some could time these two may "
                     "then do first any my now such like our over man me even most made after "
                     "also did many before must through back years where much your way well "
                     "down should because each just those people how too little state good "
                     "very make world still own see men work long get here between both life "
                     "being under never day same another know while last might us great old "
                     "year off come since against go came right used take three".split())
    with open(path, "w") as f:
        for _ in range(documents):
            n = int(np.clip(rng.lognormal(4.0, 0.8), 5, 2000))
            f.write(json.dumps({"text": " ".join(words[rng.zipf(1.3, n) % len(words)])}) + "\n")


def measure(batches, tokens_per_batch, limit, started):
    """Runs ``batches`` (an iterator) for ``limit`` tokens after the first
    batch; returns the JSON figures (the first batch timed from ``started``)."""
    next(batches)
    first = time.perf_counter() - started
    t0, c0, done = time.perf_counter(), cpu_seconds(), 0
    for _ in batches:
        done += tokens_per_batch
        if done >= limit:
            break
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return {"tokens_per_s": done / wall, "cpu_s_per_mtok": cpu / (done / 1e6),
            "first_batch_s": first, "tokens": done}


def run_tributary(args):
    import tributary

    started = time.perf_counter()
    loader = tributary.Loader(args.dataset, sequence_length=args.length, packing="concat",
                              batch_size=args.batch, rank=0, world_size=1, epochs=None,
                              decode_threads=args.threads,
                              fields=["input_ids", "labels", "position_ids", "document_ids"])
    return measure(iter(loader), args.batch * args.length, args.tokens, started)


class MegatronStyle:
    """What Megatron-Core's GPTDataset does, in numpy: a document index
    (every document of every shard, shuffled), a sample index (where each
    window of L + 1 tokens starts: document position and offset), a shuffle
    index over the samples; a sample is read from the memory-mapped .bin
    files across document boundaries. Besides tokens and labels it returns
    per-document position ids and document ids (Megatron's
    reset_position_ids / reset_attention_mask), as Tributary does."""

    def __init__(self, directory, length, seed):
        with open(os.path.join(directory, "manifest.json")) as f:
            manifest = json.load(f)
        self.length = length
        starts, lengths, self.maps, shard_of = [], [], [], []
        for number, shard in enumerate(manifest["shards"]):
            idx = open(os.path.join(directory, shard["index"]["name"]), "rb").read()
            count = struct.unpack_from("<Q", idx, 18)[0]
            lens = np.frombuffer(idx, "<i4", count, 34).astype(np.int64)
            ptrs = np.frombuffer(idx, "<i8", count, 34 + 4 * count) // 2
            self.maps.append(np.memmap(os.path.join(directory, shard["name"]), "<u2", "r"))
            starts.append(ptrs)
            lengths.append(lens)
            shard_of.append(np.full(count, number))
        rng = np.random.default_rng(seed)
        order = rng.permutation(sum(len(l) for l in lengths))            # document index
        self.doc_start = np.concatenate(starts)[order]
        self.doc_len = np.concatenate(lengths)[order]
        self.doc_shard = np.concatenate(shard_of)[order]
        self.doc_end = np.cumsum(self.doc_len)                            # in the stream
        samples = (int(self.doc_end[-1]) - 1) // length
        self.sample_start = np.arange(samples, dtype=np.int64) * length   # sample index
        self.shuffle = rng.permutation(samples)                           # shuffle index

    def __len__(self):
        return len(self.shuffle)

    def __getitem__(self, i):
        start = int(self.sample_start[self.shuffle[i]])
        end = start + self.length + 1
        doc = int(np.searchsorted(self.doc_end, start, side="right"))
        pieces, piece_lens = [], []
        while start < end:
            first = int(self.doc_end[doc] - self.doc_len[doc])
            take = min(end, int(self.doc_end[doc])) - start
            offset = int(self.doc_start[doc]) + start - first
            pieces.append(self.maps[self.doc_shard[doc]][offset:offset + take])
            piece_lens.append(take)
            start += take
            doc += 1
        tokens = np.concatenate(pieces).astype(np.int64)
        lens = np.asarray(piece_lens)
        document_ids = np.repeat(np.arange(len(lens)), lens)[:-1]
        position_ids = np.arange(self.length + 1) - np.repeat(np.cumsum(lens) - lens, lens)
        return tokens[:-1], tokens[1:], position_ids[:-1], document_ids


def run_megatron(args):
    import torch
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    started = time.perf_counter()
    dataset = MegatronStyle(args.dataset, args.length, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch, num_workers=args.workers,
                        persistent_workers=args.workers > 0, drop_last=True)
    return measure(iter(loader), args.batch * args.length, args.tokens, started)


def run_tokenizers(args):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(args.tokenizer)
    texts = [json.loads(line)["text"] for line in open(args.corpus)]
    t0, c0 = time.perf_counter(), cpu_seconds()
    for i in range(0, len(texts), 1000):
        tokenizer.encode_batch(texts[i:i + 1000])
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return {"documents_per_s": len(texts) / wall, "cpu_s": cpu}


def table(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    base = next((r for r in rows if r["name"].startswith("Megatron-style, 2 workers")), None)
    print(f"| {'contender':<44} | tokens/s | CPU s / M tokens | first batch | vs Megatron-style, 2 workers |")
    print(f"|{'-' * 46}|---:|---:|---:|---:|")
    for r in rows:
        if "tokens_per_s" not in r:
            continue
        ratio = f"{r['tokens_per_s'] / base['tokens_per_s']:.1f}x" if base else "-"
        print(f"| {r['name']:<44} | {r['tokens_per_s'] / 1e6:.2f} M | {r['cpu_s_per_mtok']:.3f} | "
              f"{r['first_batch_s']:.2f} s | {ratio} |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dataset")
    d.add_argument("out")
    d.add_argument("--tokens", type=int, default=128 << 20)
    d.add_argument("--shard-tokens", type=int, default=32 << 20)
    d.add_argument("--vocab", type=int, default=50257)
    c = sub.add_parser("corpus")
    c.add_argument("out")
    c.add_argument("--documents", type=int, default=200_000)
    for name in ("tributary", "megatron"):
        r = sub.add_parser(name)
        r.add_argument("dataset")
        r.add_argument("--name", required=True)
        r.add_argument("--length", type=int, default=2048)
        r.add_argument("--batch", type=int, default=8)
        r.add_argument("--tokens", type=int, default=32 << 20)
        r.add_argument("--threads", type=int, default=1)
        r.add_argument("--workers", type=int, default=2)
    t = sub.add_parser("tokenizers")
    t.add_argument("corpus")
    t.add_argument("--name", required=True)
    t.add_argument("--tokenizer", required=True)
    sub.add_parser("table").add_argument("results")
    args = p.parse_args()
    if args.cmd == "dataset":
        make_dataset(args.out, args.tokens, args.shard_tokens, args.vocab, seed=0)
    elif args.cmd == "corpus":
        make_corpus(args.out, args.documents, seed=0)
    elif args.cmd == "table":
        table(args.results)
    else:
        run = {"tributary": run_tributary, "megatron": run_megatron,
               "tokenizers": run_tokenizers}[args.cmd]
        print(json.dumps({"name": args.name, **run(args)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
