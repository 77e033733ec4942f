"""The Python client's main flow as one program: a private server, a task, a sample, commands
(one-shot and streamed), files, an error, and the cleanup.

Run it with the `composebox` binary on PATH (or named by $COMPOSEBOX_BIN):

    PATH=$PWD/bin:$PATH PYTHONPATH=clients/python python3 clients/python/examples/quickstart.py
"""

import composebox

COMPOSE = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}      # composebox's local base image (busybox)
    command: ["tail", "-f", "/dev/null"]
    environment:
      LEVEL: ${SAMPLE_METADATA_LEVEL-1}
  web:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
"""


def main() -> None:
    # A private `composebox serve` on a private socket, stopped when the client closes; or
    # Client(socket=...), Client(url=..., token=...) for a running server.
    with composebox.Client.spawn() as client:
        task = client.task_init(name="example-py-quickstart", compose_yaml=COMPOSE)  # or path=...
        sample = client.sample_init(task, metadata={"level": "3"})  # a live copy, ready

        r = client.exec(sample, ["sh", "-c", "echo level $LEVEL"], timeout=10)  # an argv
        print(r.exit_code, r.stdout_text, end="")  # 0 level 3 (r.stdout is the bytes)
        r = client.exec(sample, ["hostname"], service="web")  # another service of the sample
        print("web answered:", r.exit_code)

        with client.exec_stream(sample, ["sh", "-c", "for i in 1 2 3; do echo $i; done"]) as events:
            for ev in events:  # stdout/stderr chunks as they come, then the exit
                print(ev.type, ev.data)
        print("streamed exit", events.result.exit_code)

        client.write_file(sample, "notes/a.bin", b"\xff\x00")  # bytes, str, a file object or chunks
        assert client.read_file(sample, "notes/a.bin") == b"\xff\x00"
        try:
            client.read_file(sample, "/missing")
        except FileNotFoundError as e:  # composebox.NotFound
            print("not found:", e)

        client.sample_cleanup(sample)  # containers, networks, volumes: gone
        client.task_cleanup(task)
    # Closing the client closes its lease: the server removes whatever the lease still owns.


if __name__ == "__main__":
    main()
