"""Train a small GPT on a Tributary token dataset with torchrun, elastic.

    tributary coordinator --listen 127.0.0.1:7070 &          # add --etcd for HA
    torchrun --nnodes=1 --nproc-per-node=2 --rdzv-backend=c10d \\
        --rdzv-endpoint=127.0.0.1:29400 --max-restarts=3 \\
        examples/train_gpt.py --dataset /tmp/tokens --coordinator 127.0.0.1:7070

When ``--dataset`` holds no ``manifest.json`` the first rank writes a
synthetic corpus (``--documents`` JSONL documents of grammar-made sentences,
so that the loss visibly falls) and packs it with the byte-level tokenizer:

    tributary pack corpus.jsonl /tmp/tokens --tokenizer bytes --text-field text

The loader cuts the token stream of the rank's documents (in a seeded
order) into windows of ``--sequence-length`` + 1 tokens across document
boundaries (``packing="concat"``); a batch holds ``input_ids``, ``labels``
(shifted by one), ``position_ids`` (restarting at 0 at each document start)
and ``document_ids``. The model takes its positions from ``position_ids``;
with ``--document-mask`` attention also stays inside each document.

Every ``--checkpoint-every`` steps rank 0 writes model, optimizer and loader
state to ``--checkpoint-dir``; once the file is durable every rank commits
the loader state to the coordinator. A restarted group (after a preemption,
maybe with another world size) loads the newest checkpoint the job
committed and its loader resumes right after the committed rows, so every
row (token window) of the epoch goes into the final model exactly once:
rows trained after the last checkpoint by the failed group are discarded
with that group's model.

With ``--step-log FILE`` each rank appends one line per step (its loss and
the row ids it trained); examples/preemption_gpt.sh checks them.
"""

import argparse
import datetime
import fcntl
import glob
import json
import math
import os
import random
import subprocess
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import tributary

FIELDS = ["input_ids", "labels", "position_ids", "document_ids"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True, help="a token dataset; packed here when absent")
    p.add_argument("--coordinator", default=os.environ.get("TRIBUTARY_COORDINATOR"))
    p.add_argument("--job", default="train-gpt")
    p.add_argument("--documents", type=int, default=6000, help="synthetic corpus size")
    p.add_argument("--shard-tokens", type=int, default=64 << 10)
    p.add_argument("--tributary-bin", default=os.environ.get("TRIBUTARY_BIN", "tributary"))
    p.add_argument("--sequence-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dim", type=int, default=192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--document-mask", action="store_true",
                   help="attend only within each document (from document_ids)")
    p.add_argument("--checkpoint-dir", default="checkpoints")
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--step-log", help="append one line per step to this file")
    return p.parse_args(argv)


# --- the corpus ------------------------------------------------------------

NOUNS = "cat dog bird fish river tree stone cloud child farmer king robot".split()
ADJECTIVES = "red small old quiet bright heavy green lazy".split()
VERBS = "sees follows likes carries finds pushes paints watches".split()
PLACES = "near the hill|under the bridge|in the garden|by the sea|at night".split("|")


def sentence(rng):
    """Subject, verb, object and sometimes a place: a grammar whose rules a
    small model learns within a few hundred steps."""
    words = ["the", rng.choice(ADJECTIVES), rng.choice(NOUNS), rng.choice(VERBS),
             "the", rng.choice(NOUNS)]
    if rng.random() < 0.5:
        words.append(rng.choice(PLACES))
    return " ".join(words) + "."


def write_corpus(path, documents, seed):
    """``documents`` JSONL lines ``{"text": ...}`` of 1 to 6 sentences."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(documents):
            text = " ".join(sentence(rng) for _ in range(rng.randint(1, 6)))
            f.write(json.dumps({"text": text.capitalize()}) + "\n")


def ensure_dataset(args):
    """Packs the synthetic corpus into ``args.dataset`` unless a manifest is
    there; one process packs (under a file lock), the others wait for it."""
    manifest = os.path.join(args.dataset, "manifest.json")
    if os.path.exists(manifest):
        return
    os.makedirs(os.path.dirname(os.path.abspath(args.dataset)), exist_ok=True)
    with open(args.dataset.rstrip("/") + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(manifest):
            return
        corpus = args.dataset.rstrip("/") + ".corpus.jsonl"
        write_corpus(corpus, args.documents, args.seed)
        pack = subprocess.run([args.tributary_bin, "pack", corpus, args.dataset,
                               "--tokenizer", "bytes", "--text-field", "text",
                               "--shard-tokens", str(args.shard_tokens)],
                              capture_output=True, text=True)
        if pack.returncode != 0:
            raise SystemExit(f"{args.tributary_bin} pack {corpus} {args.dataset} failed "
                             f"(--tributary-bin or TRIBUTARY_BIN names the binary):\n{pack.stderr}")


# --- the model -------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        if mask is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """A decoder-only transformer; positions come from the batch's
    ``position_ids`` (restarting at each document start)."""

    def __init__(self, vocab, length, dim, layers, heads):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, dim), nn.Embedding(length, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, position_ids, document_ids=None):
        mask = None
        if document_ids is not None:  # causal and within the token's document
            t = input_ids.shape[1]
            causal = torch.ones(t, t, dtype=torch.bool).tril()
            mask = (causal & (document_ids[:, :, None] == document_ids[:, None, :]))[:, None]
        x = self.tokens(input_ids) + self.positions(position_ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


# --- the elastic loop ------------------------------------------------------

def join_group(rank, world, above):
    """Forms this group's process group; returns its token, a number above
    ``above`` and above every earlier group's (rank 0's clock in ms); the
    loader's restart count. See examples/train_resnet.py for why gloo does
    not meet in torchrun's own store."""
    host, timeout = os.environ["MASTER_ADDR"], datetime.timedelta(minutes=5)
    agent = dist.TCPStore(
        host, int(os.environ["MASTER_PORT"]), world, timeout=timeout,
        is_master=rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True",
    )
    key = "train-gpt/group-store"
    if rank == 0:
        store = dist.TCPStore(host, 0, world, is_master=True, timeout=timeout,
                              wait_for_workers=False)
        store.set("token", str(max(time.time_ns() // 1_000_000, above + 1)))
        agent.set(key, str(store.port))
    else:
        tried = None
        while True:
            port = agent.get(key).decode()
            if port != tried:
                try:
                    store = dist.TCPStore(host, int(port), world, is_master=False,
                                          timeout=datetime.timedelta(seconds=5))
                    break
                except RuntimeError:  # torch's DistNetworkError
                    tried = port  # an earlier group's: wait for this one's
            time.sleep(0.1)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    return int(store.get("token"))


def checkpoints(directory):
    """The checkpoint files in ``directory``, newest first."""
    return sorted(glob.glob(os.path.join(directory, "step-*.pt")), reverse=True)


def save_checkpoint(directory, step, payload):
    """Writes ``step-N.pt`` durably (fsynced file, then renamed, then the
    directory fsynced) and keeps it and the one before: the newest may not
    be committed by every rank when a failure strikes."""
    path = os.path.join(directory, f"step-{step:08d}.pt")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for old in checkpoints(directory)[2:]:
        os.remove(old)


def resume(loader, directory):
    """The newest checkpoint whose loader state the job committed, loaded
    into ``loader``; None when there is none. A group killed after rank 0
    wrote the newest checkpoint but before every rank committed it resumes
    from the one before (load_state_dict changes nothing when it refuses)."""
    for path in checkpoints(directory):
        checkpoint = torch.load(path, weights_only=False)
        try:
            loader.load_state_dict(checkpoint["loader"])
            return checkpoint
        except ValueError as error:
            if "past the job's commit" not in str(error):
                raise
    return None


def main(argv=None):
    args = parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    ensure_dataset(args)
    newest = checkpoints(args.checkpoint_dir)
    above = torch.load(newest[0], weights_only=False)["group"] if newest else 0
    group = join_group(rank, world, above)
    log = open(args.step_log, "a", buffering=1) if args.step_log else None

    def emit(line):
        if log:
            log.write(line + "\n")

    with open(os.path.join(args.dataset, "manifest.json")) as f:
        vocab = json.load(f).get("vocab_size", 257)
    torch.manual_seed(args.seed)
    model = nn.parallel.DistributedDataParallel(
        GPT(vocab, args.sequence_length, args.dim, args.layers, args.heads))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    loader = tributary.Loader(
        args.dataset,
        coordinator=args.coordinator,
        job=args.job,
        sequence_length=args.sequence_length,
        packing="concat",
        batch_size=args.batch_size,
        fields=FIELDS,
        seed=args.seed,
        epochs=args.epochs,
        restart_count=group,
        return_ids=True,
    )
    step = 0
    checkpoint = resume(loader, args.checkpoint_dir)
    if checkpoint:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        step = checkpoint["step"]
        state = checkpoint["loader"]
        emit(f"resume {group} {rank} {state['generation']} {state['samples']} {step}")
    emit(f"start {group} {rank} {world} {os.getpid()} {loader.generation}")
    parameters = sum(p.numel() for p in model.parameters())
    print(f"rank {rank}/{world} group {group}: {parameters / 1e6:.2f}M parameters, generation "
          f"{loader.generation}, {len(loader)} batches to read, from step {step}", flush=True)

    started, tokens = time.time(), 0
    for _ in range(loader.epoch, args.epochs):
        for input_ids, labels, position_ids, document_ids, ids in loader:
            input_ids, labels = torch.from_numpy(input_ids), torch.from_numpy(labels)
            logits = model(input_ids, torch.from_numpy(position_ids),
                           torch.from_numpy(document_ids) if args.document_mask else None)
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step, tokens = step + 1, tokens + input_ids.numel()
            state = loader.state_dict()
            emit(f"train {group} {rank} {state['generation']} {state['samples']} {step} "
                 f"{loss.item():.4f} " + " ".join(str(i) for i in ids.tolist()))
            if step % args.checkpoint_every == 0:
                if rank == 0:
                    save_checkpoint(args.checkpoint_dir, step, {
                        "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "step": step, "loader": state, "group": group})
                dist.barrier()  # the checkpoint is durable before anyone commits
                loader.commit(state)
                emit(f"commit {group} {rank} {state['generation']} {state['samples']} {step}")
                elapsed = time.time() - started
                print(f"rank {rank}: step {step} loss {loss.item():.3f} "
                      f"({loss.item() / math.log(2):.2f} bits/token) "
                      f"{tokens * world / elapsed:.0f} tokens/s (all ranks)", flush=True)
    emit(f"done {group} {rank} {step}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
