"""A TCP proxy that adds latency: every chunk is forwarded `delay` seconds
after it arrived, in each direction, so a request/response round trip costs
2 x delay more while bandwidth is unchanged (this kernel has no tc netem).

    python bench/delay_proxy.py --listen 127.0.0.1:9100 --to 127.0.0.1:9000 --rtt-ms 20

TCP_NODELAY is set on both sides: small responses must not wait for delayed
ACKs, or the proxy would add far more than it says.
"""

import argparse
import asyncio
import socket


def nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def forward() -> None:
        while True:
            due, chunk = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if chunk is None:
                writer.close()
                return
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.create_task(forward())
    try:
        while chunk := await reader.read(1 << 16):
            queue.put_nowait((loop.time() + delay, chunk))
    except ConnectionError:
        pass
    queue.put_nowait((loop.time() + delay, None))
    try:
        await sender
    except ConnectionError:
        pass


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--listen", required=True, help="host:port to listen on")
    p.add_argument("--to", required=True, help="host:port to forward to")
    p.add_argument("--rtt-ms", type=float, default=20.0, help="added round-trip time")
    args = p.parse_args()
    host, port = args.listen.rsplit(":", 1)
    to_host, to_port = args.to.rsplit(":", 1)
    one_way = args.rtt_ms / 2000.0

    async def handle(client_r, client_w):
        try:
            server_r, server_w = await asyncio.open_connection(to_host, int(to_port))
        except OSError:
            client_w.close()
            return
        nodelay(client_w)
        nodelay(server_w)
        await asyncio.gather(pipe(client_r, server_w, one_way), pipe(server_r, client_w, one_way))

    server = await asyncio.start_server(handle, host, int(port))
    print(f"delay proxy {args.listen} -> {args.to}, +{args.rtt_ms:g} ms per round trip", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
