#!/usr/bin/env python3
"""delayrelay.py LISTEN_PORT TARGET_HOST:PORT DELAY_MS PID_FILE

A TCP relay that pair.sh's `delay N MS` runs inside DC N's network namespace: it
accepts on LISTEN_PORT (all addresses of the namespace), connects each client to
TARGET, and passes every chunk of bytes on DELAY_MS milliseconds after it arrived,
in each direction, without limiting throughput (chunks in flight overlap). Bytes are
copied unread, so TLS passes through and the client still verifies the DC's own
certificate. It writes its process id to PID_FILE (python3 may be a wrapper
that forks, as pyenv's is, so the launcher's pid is not the relay's). It stands in for `tc qdisc ... netem delay`, which this kernel lacks.
"""
import asyncio
import os
import sys


async def pipe(reader, writer, delay):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def read():
        while True:
            try:
                data = await reader.read(65536)
            except (ConnectionError, OSError):
                data = b""
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                return

    async def write():
        while True:
            due, data = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))
            try:
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                return

    await asyncio.gather(read(), write())


async def main():
    port, target, delay_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    host, tport = target.rsplit(":", 1)
    delay = delay_ms / 1000.0

    async def handle(creader, cwriter):
        try:
            sreader, swriter = await asyncio.open_connection(host, int(tport))
        except OSError:
            cwriter.close()
            return
        try:
            await asyncio.gather(pipe(creader, swriter, delay), pipe(sreader, cwriter, delay))
        finally:
            for w in (cwriter, swriter):
                w.close()

    server = await asyncio.start_server(handle, port=port, reuse_address=True)
    with open(sys.argv[4], "w") as f:
        f.write(f"{os.getpid()}\n")
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
