"""A relative local dataset path is the rank's, not the coordinator's
(issue 26, 2b): the rank makes it absolute before it reaches a coordinator
that runs in another working directory."""

import shutil
import subprocess
import sys
import textwrap

from test_torchrun import start_coordinator

RANK = textwrap.dedent("""
    import sys, tributary
    url, address, job = sys.argv[1:4]
    loader = tributary.Loader(url, coordinator=address, job=job, batch_size=4,
                              image_size=8, epochs=1, return_ids=True)
    print(sum(len(batch[-1]) for batch in loader))
""")


def test_a_relative_local_dataset_path_is_resolved_in_the_ranks_directory(dataset, tmp_path):
    coordinator_dir, rank_dir = tmp_path / "coordinator", tmp_path / "rank"
    coordinator_dir.mkdir()
    shutil.copytree(dataset, rank_dir / "data" / "shards")
    (rank_dir / "rank.py").write_text(RANK)
    coordinator, address = start_coordinator(cwd=coordinator_dir)
    try:
        # The coordinator's directory holds no data/: it reads the
        # manifest from the absolute path the rank sent.
        for i, url in enumerate(("data/shards", "./data/shards/", "file:data/shards")):
            run = subprocess.run([sys.executable, "rank.py", url, address, f"relative-{i}"],
                                 cwd=rank_dir, capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, f"{url}: {run.stderr}"
            assert run.stdout.split() == ["40"], url
    finally:
        coordinator.kill()
        coordinator.wait()
