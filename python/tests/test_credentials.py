"""Job credentials against a real coordinator with an operator token: a
``tributary.Loader`` rank reads its job with the credential ``tributary job
token`` derives, and the same credential reaches no other job, lists no
jobs and deletes none."""

import os
import subprocess

import pytest

import tributary
from conftest import tributary_bin
from test_torchrun import accepts, free_port, wait_for

OPERATOR = "operator-s3cret"


@pytest.fixture()
def coordinator(tmp_path):
    token_file = tmp_path / "operator-token"
    token_file.write_text(OPERATOR + "\n")
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [tributary_bin(), "coordinator", "--listen", address,
         "--auth-token-file", str(token_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(f"the coordinator at {address}", lambda: accepts(address), 30, proc)
        yield address, token_file
    finally:
        proc.kill()
        proc.wait()


def job_token(token_file, job):
    env = {**os.environ, "TRIBUTARY_AUTH_TOKEN_FILE": str(token_file)}
    env.pop("TRIBUTARY_AUTH_TOKEN", None)
    out = subprocess.run([tributary_bin(), "job", "token", job], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def test_a_rank_reads_its_job_with_a_job_credential_and_reaches_no_other(
    dataset, coordinator, monkeypatch
):
    address, token_file = coordinator
    monkeypatch.delenv("TRIBUTARY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("TRIBUTARY_AUTH_TOKEN_FILE", raising=False)
    token = job_token(token_file, "mine")
    assert token.startswith("tj1:mine:")
    loader = tributary.Loader(dataset, coordinator=address, job="mine", auth_token=token,
                              batch_size=4, image_size=8, epochs=1, return_ids=True,
                              timeout_s=10)
    ids = [i for _, _, batch in loader for i in batch.tolist()]
    assert sorted(ids) == list(range(len(ids))) and ids, "the epoch read with the job credential"
    with pytest.raises(PermissionError, match='job "mine".s: it cannot act on job "theirs"'):
        tributary.Loader(dataset, coordinator=address, job="theirs", auth_token=token,
                         batch_size=4, image_size=8, timeout_s=10)
    env = {**os.environ, "TRIBUTARY_AUTH_TOKEN": token}
    for command in (["status", "--coordinator", address],
                    ["job", "delete", "mine", "--coordinator", address]):
        out = subprocess.run([tributary_bin(), *command], env=env, capture_output=True,
                             text=True)
        assert out.returncode != 0, out
        assert "needs the operator's token" in out.stderr, out.stderr
    # A forged credential is not one.
    forged = token[:-1] + ("0" if token[-1] != "0" else "1")
    with pytest.raises(PermissionError, match="wrong bearer token"):
        tributary.Loader(dataset, coordinator=address, job="mine", auth_token=forged,
                         batch_size=4, image_size=8, timeout_s=10)
