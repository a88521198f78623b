"""Rust's logs from Python: off unless RUST_LOG asks; JSON lines with the
member's span (job, member, rank, generation) with TRIBUTARY_LOG_FORMAT=json."""

import json
import os
import subprocess
import sys

SCRIPT = """
import sys, tributary
loader = tributary.Loader(sys.argv[1], job="logged", batch_size=8, image_size=32, decode_threads=1)
next(iter(loader))
"""


def run(dataset, **env):
    environment = {k: v for k, v in os.environ.items() if k not in ("RUST_LOG", "TRIBUTARY_LOG_FORMAT")}
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", SCRIPT, dataset], env=environment,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return done.stderr.decode()


def test_json_logs_carry_the_members_span(dataset):
    lines = [json.loads(line) for line in run(dataset, RUST_LOG="info",
                                              TRIBUTARY_LOG_FORMAT="json").splitlines()
             if line.startswith("{")]
    joined = [line for line in lines
              if line["fields"].get("message") == "joined" and line.get("span", {}).get("name") == "member"]
    assert joined, lines
    span = joined[0]["span"]
    assert span["job"] == "logged"
    assert span["member"]
    assert span["generation"] == 0
    # The in-process coordinator's side of the same Join, in its call's span.
    calls = [line for line in lines if line.get("span", {}).get("name") == "rpc"]
    assert any(c["span"]["method"] == "Join" and c["span"]["job"] == "logged" for c in calls), calls


def test_no_rust_log_no_logs(dataset):
    assert run(dataset) == ""
