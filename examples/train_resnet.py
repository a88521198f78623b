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

With ``--step-log FILE`` each rank appends one line per step (the sample ids it
trained); the end-to-end test reads them.
"""

import argparse
import os
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
    return p.parse_args()


def main():
    args = parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    # A store namespace per restart: gloo must not find the addresses the
    # previous (killed) group published.
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
        is_master=rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True",
    )
    dist.init_process_group(
        "gloo", store=dist.PrefixStore(f"train-resnet/{restart}", store), rank=rank, world_size=world
    )
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
        return_ids=True,
    )
    step = 0
    if os.path.exists(args.checkpoint):
        checkpoint = torch.load(args.checkpoint, weights_only=False)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        step = checkpoint["step"]
        # The generation this loader reads must resume from this very state.
        loader.load_state_dict(checkpoint["loader"])
        state = checkpoint["loader"]
        emit(f"resume {restart} {rank} {state['generation']} {state['samples']} {step}")
    emit(f"start {restart} {rank} {world} {os.getpid()} {loader.generation}")
    print(f"rank {rank}/{world} restart {restart}: generation {loader.generation}, "
          f"{len(loader)} batches to read, from step {step}", flush=True)

    started, samples = time.time(), 0
    while True:
        batches = 0
        for images, labels, ids in loader:
            images = torch.from_numpy(images).contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(model(images), torch.from_numpy(labels))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step, batches, samples = step + 1, batches + 1, samples + len(ids)
            state = loader.state_dict()
            emit(f"train {restart} {rank} {state['generation']} {state['samples']} "
                 + " ".join(str(i) for i in ids.tolist()))
            if step % args.checkpoint_every == 0:
                if rank == 0:
                    tmp = args.checkpoint + ".tmp"
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                "step": step, "loader": state}, tmp)
                    os.replace(tmp, args.checkpoint)
                dist.barrier()  # the checkpoint is durable before anyone commits
                loader.commit(state)
                emit(f"commit {restart} {rank} {state['generation']} {state['samples']} {step}")
                elapsed = time.time() - started
                print(f"rank {rank}: step {step} loss {loss.item():.3f} "
                      f"{samples * world / elapsed:.0f} samples/s (all ranks)", flush=True)
        if batches == 0:
            break  # no epoch left
    emit(f"done {restart} {rank} {step}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
