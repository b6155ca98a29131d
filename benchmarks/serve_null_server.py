"""A null OpenAI-style streaming endpoint for benchmarks/serve_client.py only: any POST gets, at
once, a few SSE chunks, a usage chunk and [DONE], then the connection closes. Raw asyncio
streams, no framework, so what the client measures is the client.

    python benchmarks/serve_null_server.py PORT
"""

from __future__ import annotations

import asyncio
import sys

CHUNK = b'data: {"choices":[{"index":0,"text":"x"}]}\n\n'
TAIL = (
    b'data: {"choices":[{"index":0,"text":""}],"usage":{"prompt_tokens":1,"completion_tokens":4}}\n\n'
    b"data: [DONE]\n\n"
)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(HEAD + CHUNK)  # the first token at once
        await writer.drain()
        writer.write(CHUNK * 3 + TAIL)
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(answer, "127.0.0.1", port, backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
