"""The broker cases' other processes, each its own interpreter so that no client
shares a GIL with another or with the broker: a TCP sink for the loopback limit
and a producer paced at a fixed rate for the end-to-end latency.

    python peers.py sink                      # prints its port; per connection,
                                              # reads to EOF, answers the byte count
    python peers.py paced BOOTSTRAP TOPIC COUNT RATE

Only the standard library and confluent-kafka: no seglog, no bench harness.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

MIB = 1 << 20
VALUE_BYTES = 100
TICK_S = 0.001  # the paced producer sends RATE * TICK_S records per tick

#: The latency case's producer: acks=1, sent at once (linger.ms=0), no Nagle delay.
PACED_PRODUCER = {
    "acks": "1",
    "linger.ms": 0,
    "compression.type": "none",
    "enable.idempotence": False,
    "socket.nagle.disable": True,
}


def sink() -> None:
    """Accepts connections one after another until killed; reads each into a
    1 MiB buffer with recv_into (no Python object per chunk) until EOF, then
    answers the byte count as 8 bytes."""
    srv = socket.create_server(("127.0.0.1", 0))
    print(srv.getsockname()[1], flush=True)
    buf = bytearray(MIB)
    while True:
        conn, _ = srv.accept()
        with conn:
            total = 0
            recv_into = conn.recv_into
            while n := recv_into(buf):
                total += n
            conn.sendall(struct.pack(">q", total))


def paced(bootstrap: str, topic: str, count: int, rate: int) -> None:
    """Produces ``count`` records at ``rate`` records/s in ticks of 1 ms; each value
    starts with the wall-clock time in microseconds taken just before its produce()
    call (the record's ms CreateTime is too coarse for sub-ms latencies)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **PACED_PRODUCER})
    p.list_topics(topic, timeout=10)  # connect and learn the leader before the clock starts
    produce, poll = p.produce, p.poll
    pad = bytes(VALUE_BYTES - 8)
    per_tick = max(1, round(rate * TICK_S))
    tick_ns = round(per_tick / rate * 1e9)
    pack, now_us, clock = struct.Struct(">q").pack, time.time_ns, time.perf_counter_ns
    start = clock()
    sent = 0
    tick = 0
    while sent < count:
        delay = start + tick * tick_ns - clock()
        if delay > 0:
            time.sleep(delay / 1e9)
        for _ in range(min(per_tick, count - sent)):
            produce(topic, pack(now_us() // 1000) + pad, sent.to_bytes(8, "big"))
            sent += 1
        poll(0)
        tick += 1
    elapsed = (clock() - start) / 1e9
    left = p.flush(30)
    # The achieved rate, for the bench to check that the pacing held.
    print(f"{sent - left} {elapsed:.6f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["sink"]:
        sink()
    elif sys.argv[1:2] == ["paced"] and len(sys.argv) == 6:
        paced(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit(__doc__)
