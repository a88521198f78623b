"""Ctrl-C interrupts a call blocked in Rust (the GIL is released, and the wait
wakes to run Python's signal handlers): a loader whose object store never
answers raises KeyboardInterrupt, and the program exits."""

import http.server
import pathlib
import signal
import subprocess
import sys
import threading

import pytest

SCRIPT = """
import signal, sys, tributary
# A process started in the background may inherit SIGINT ignored; the test
# is about what happens when Python's handler runs.
signal.signal(signal.SIGINT, signal.default_int_handler)
options = dict(aws_endpoint=sys.argv[1], aws_allow_http="true", aws_region="us-east-1",
               aws_access_key_id="test", aws_secret_access_key="test")
try:
    loader = tributary.Loader("s3://data/ds", storage_options=options, batch_size=8, image_size=32)
    print("constructed", flush=True)
    next(iter(loader))
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""


class Store(http.server.ThreadingHTTPServer):
    """Path-style S3 GETs of ``/data/ds/<file>`` served from the dataset
    directory, except that requests for ``hang_on`` files never get an answer."""

    daemon_threads = True

    def __init__(self, root: pathlib.Path, hang_on: str) -> None:
        self.root, self.hang_on = root, hang_on
        self.hanging = threading.Event()  # a request is being held
        self.release = threading.Event()
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    server: Store

    def do_GET(self) -> None:
        name = self.path.split("?")[0].removeprefix("/data/ds/")
        if name.endswith(self.server.hang_on):
            self.server.hanging.set()
            self.server.release.wait()
            return
        path = self.server.root / name
        if not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"1"')
        self.send_header("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize(
    "hang_on, reached",
    [("manifest.json", ""), (".tar", "constructed")],
    ids=["constructor waiting for the manifest", "next() waiting for a shard"],
)
def test_ctrl_c_interrupts_a_blocked_call(dataset, hang_on, reached):
    store = Store(pathlib.Path(dataset), hang_on)
    threading.Thread(target=store.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{store.server_address[1]}"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, endpoint],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wakes the wait below early should the process die instead.
    threading.Thread(target=lambda: (proc.wait(), store.hanging.set()), daemon=True).start()
    try:
        # The request is held: the process is blocked inside the Rust call.
        assert store.hanging.wait(timeout=60) and proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        store.release.set()
        store.shutdown()
    assert proc.returncode == 3, err
    assert out.split() == [*reached.split(), "interrupted"], err
