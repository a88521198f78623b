"""Train torchvision's resnet18 on a Tributary dataset with torchrun, elastic.

    tributary synth /tmp/imgs --images 2000 --classes 10
    tributary pack /tmp/imgs /tmp/ds
    tributary coordinator --listen 127.0.0.1:7070 &          # add --etcd for HA
    torchrun --nnodes=1:3 --nproc-per-node=2 --rdzv-backend=c10d \\
        --rdzv-endpoint=127.0.0.1:29400 --max-restarts=3 \\
        examples/train_resnet.py --dataset /tmp/ds --coordinator 127.0.0.1:7070

Every ``--checkpoint-every`` steps rank 0 saves model, optimizer and loader
state; once the file is in place every rank commits the loader state to the
coordinator. When a node is preempted torchrun restarts the group (maybe
with another world size); the new group loads the checkpoint and its
loader resumes right after the committed samples, so every sample of the
epoch goes into the final model exactly once: samples trained after the
last checkpoint by the failed group are discarded with that group's model.

Each group that torchrun forms (at start, after a failure, or when nodes join
or leave) gets a token, and the loader uses it as its restart count: the
coordinator starts a new generation for a newer token. torchrun's own
``TORCHELASTIC_RESTART_COUNT`` cannot serve: every node's agent counts its
own failures, so a node that joins later or replaces a preempted one starts
at 0 while the others do not. See ``join_group``.

With ``--val-dataset URL`` every rank measures the accuracy on a held-out
split after each training epoch: an unshuffled loader (``shuffle=False``,
``transform="eval"``: resize and center crop) reads the rank's contiguous
part of it, every sample exactly once across the ranks, and the counts are
summed with one all_reduce. A held-out split made the same way:

    tributary synth /tmp/val-imgs --images 500 --classes 10 --seed 1
    tributary pack /tmp/val-imgs /tmp/val
    torchrun ... examples/train_resnet.py --dataset /tmp/ds \
        --val-dataset /tmp/val --coordinator 127.0.0.1:7070

With ``--step-log FILE`` each rank appends one line per step (the sample ids it
trained); the end-to-end tests read them.
"""

import argparse
import datetime
import json
import os
import shutil
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision

import tributary


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--coordinator", default=os.environ.get("TRIBUTARY_COORDINATOR"))
    p.add_argument("--job", default="train-resnet")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=112)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--checkpoint", default="checkpoint.pt")
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--decode-threads", type=int, default=1)
    p.add_argument("--step-log", help="append one line per step to this file")
    p.add_argument("--val-dataset", help="held-out split: report its accuracy after each epoch")
    return p.parse_args()


def join_group(rank, world, above):
    """Forms this group's process group; returns its token, a number above
    ``above`` and above every earlier group's (rank 0's clock in ms).

    torchrun hands every group the same store (MASTER_ADDR:MASTER_PORT, kept
    by rank 0's node agent across groups), holding what earlier groups wrote,
    so gloo must not meet there. Rank 0 starts a fresh store, publishes its
    port in the agent's store and the token in its own; the other ranks
    connect to the published port once it answers (an earlier group's rank 0
    is gone, so a stale port does not).
    """
    host, timeout = os.environ["MASTER_ADDR"], datetime.timedelta(minutes=5)
    agent = dist.TCPStore(
        host, int(os.environ["MASTER_PORT"]), world, timeout=timeout,
        is_master=rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True",
    )
    key = "train-resnet/group-store"
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


def val_accuracy(model, loader):
    """(correct, total) over the whole held-out split, summed over the ranks.

    Each rank reads its own contiguous part (the default ``tail="uneven"``:
    no sample is counted twice, and the ranks' batch counts may differ,
    which is fine as no collective runs per batch)."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.int64)
    with torch.no_grad():
        for images, labels in loader:
            images = torch.from_numpy(images).contiguous(memory_format=torch.channels_last)
            predicted = model(images).argmax(dim=1)
            counts[0] += int((predicted == torch.from_numpy(labels)).sum())
            counts[1] += len(labels)
    model.train()
    dist.all_reduce(counts)
    return int(counts[0]), int(counts[1])


def dataset_samples(url):
    """The sample count of a local dataset's manifest, None for a remote one."""
    path = os.path.join(url.removeprefix("file://"), "manifest.json")
    if "://" in url and not url.startswith("file://") or not os.path.exists(path):
        return None
    with open(path) as f:
        manifest = json.load(f)
    return manifest.get("samples", sum(shard["samples"] for shard in manifest["shards"]))


def main():
    args = parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    checkpoint = None
    if os.path.exists(args.checkpoint):
        checkpoint = torch.load(args.checkpoint, weights_only=False)
    group = join_group(rank, world, checkpoint.get("group", 0) if checkpoint else 0)
    log = open(args.step_log, "a", buffering=1) if args.step_log else None

    def emit(line):
        if log:
            log.write(line + "\n")

    torch.manual_seed(args.seed)
    model = torch.nn.parallel.DistributedDataParallel(
        torchvision.models.resnet18(num_classes=args.classes).to(memory_format=torch.channels_last)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loader = tributary.Loader(
        args.dataset,
        coordinator=args.coordinator,
        job=args.job,
        batch_size=args.batch_size,
        image_size=args.image_size,
        seed=args.seed,
        epochs=args.epochs,
        decode_threads=args.decode_threads,
        restart_count=group,
        return_ids=True,
    )
    val = None
    if args.val_dataset:
        # Created once: an unshuffled loader reads its part again on every pass.
        val = tributary.Loader(args.val_dataset, shuffle=False, transform="eval",
                               image_size=args.image_size, batch_size=args.batch_size,
                               decode_threads=args.decode_threads)
        val_expected = dataset_samples(args.val_dataset)
    step = 0
    if checkpoint:
        # The loader resumes from this very state, which must be the job's
        # commit: the point every rank committed. A group killed after the
        # newest checkpoint was written but before every rank committed it
        # resumes from the one before (load_state_dict changes nothing when
        # it refuses).
        try:
            loader.load_state_dict(checkpoint["loader"])
        except ValueError as error:
            previous = args.checkpoint + ".prev"
            if "past the job's commit" not in str(error) or not os.path.exists(previous):
                raise
            checkpoint = torch.load(previous, weights_only=False)
            loader.load_state_dict(checkpoint["loader"])
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        step = checkpoint["step"]
        state = checkpoint["loader"]
        emit(f"resume {group} {rank} {state['generation']} {state['samples']} {step}")
    emit(f"start {group} {rank} {world} {os.getpid()} {loader.generation}")
    print(f"rank {rank}/{world} group {group}: generation {loader.generation}, "
          f"{len(loader)} batches to read, from step {step}", flush=True)

    started, samples = time.time(), 0
    # A restarted group resumes inside its generation's epoch; each pass
    # over the loader is the next epoch, up to the job's last (a pass past
    # it would raise).
    for _ in range(loader.epoch, args.epochs):
        for images, labels, ids in loader:
            images = torch.from_numpy(images).contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(model(images), torch.from_numpy(labels))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step, samples = step + 1, samples + len(ids)
            state = loader.state_dict()
            emit(f"train {group} {rank} {state['generation']} {state['samples']} "
                 + " ".join(str(i) for i in ids.tolist()))
            if step % args.checkpoint_every == 0:
                if rank == 0:
                    tmp = args.checkpoint + ".tmp"
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                "step": step, "loader": state, "group": group}, tmp)
                    if os.path.exists(args.checkpoint):  # kept until all commit the new one
                        shutil.copyfile(args.checkpoint, tmp + ".prev")
                        os.replace(tmp + ".prev", args.checkpoint + ".prev")
                    os.replace(tmp, args.checkpoint)
                dist.barrier()  # the checkpoint is durable before anyone commits
                loader.commit(state)
                emit(f"commit {group} {rank} {state['generation']} {state['samples']} {step}")
                elapsed = time.time() - started
                print(f"rank {rank}: step {step} loss {loss.item():.3f} "
                      f"{samples * world / elapsed:.0f} samples/s (all ranks)", flush=True)
        if val is not None:
            correct, total = val_accuracy(model, val)
            if val_expected is not None:
                assert total == val_expected, f"validation read {total} of {val_expected} samples"
            if rank == 0:
                print(f"epoch {loader.epoch} val_accuracy {correct / max(total, 1):.4f} "
                      f"({total} samples)", flush=True)
    emit(f"done {group} {rank} {step}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
