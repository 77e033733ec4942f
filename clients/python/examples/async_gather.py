"""AsyncClient: the same calls, awaited, on asyncio; eight commands run at once.

    PATH=$PWD/bin:$PATH PYTHONPATH=clients/python python3 clients/python/examples/async_gather.py
"""

import asyncio

import composebox


async def main() -> None:
    async with composebox.AsyncClient.spawn() as client:
        task = await client.task_init(name="example-py-async")  # no file: composebox's default image
        sample = await client.sample_init(task)
        results = await asyncio.gather(*[client.exec(sample, ["echo", str(i)]) for i in range(8)])
        print("gathered:", " ".join(r.stdout_text.strip() for r in results))

        stream = await client.exec_stream(sample, ["sh", "-c", "echo a; echo b >&2"])
        async for ev in stream:
            print(ev.type, ev.data)

        await client.write_file(sample, "big.bin", b"x" * (1 << 20))
        data = await client.read_file(sample, "big.bin")
        print("read back", len(data), "bytes")
        await client.task_cleanup(task)  # removes the sample too


if __name__ == "__main__":
    asyncio.run(main())
