"""A confluent-kafka (librdkafka) producer and reader for a broker group's
fail-over. Usage: python3 THIS BOOTSTRAP TOPIC PHASE ARGS, where PHASE is
  produce SECONDS OUT  an idempotent acks=all producer sends "p-N" at about
                       200 messages a second for SECONDS, then flushes; OUT
                       gets one line per acknowledged message: value,
                       partition, offset and the wall-clock time of its ack
  read OUT             reads every partition from its start to the high
                       watermark it had when the read began (or until 30 s
                       without a message); OUT gets value, partition and
                       offset per message
Delivery errors are printed and counted on stderr; they are not failures
(a fail-over may outlast a message's timeout), lost acknowledged messages are."""
import sys
import time
import confluent_kafka as ck

BOOT, TOPIC, PHASE = sys.argv[1], sys.argv[2], sys.argv[3]


def produce(seconds, out):
    p = ck.Producer({"bootstrap.servers": BOOT, "acks": "all", "enable.idempotence": True,
                     "message.timeout.ms": 60000, "linger.ms": 5})
    acked, failed = [], []

    def report(err, msg):
        if err:
            failed.append(str(err))
        else:
            acked.append((msg.value().decode(), msg.partition(), msg.offset(), time.time()))

    n, end = 0, time.time() + seconds
    while time.time() < end:
        p.produce(TOPIC, value=b"p-%d" % n, on_delivery=report)
        n += 1
        p.poll(0.005)
    left = p.flush(90)
    with open(out, "w") as f:
        for value, partition, offset, at in acked:
            f.write(f"{value} {partition} {offset} {at:.3f}\n")
    print(f"sent {n}, acknowledged {len(acked)}, failed {len(failed)}, unflushed {left}", file=sys.stderr)
    for e in sorted(set(failed))[:5]:
        print(f"  delivery error: {e}", file=sys.stderr)


def read(out):
    # Reading to each partition's high watermark, not to a count: the topic
    # also holds messages that were stored but never acknowledged (a
    # fail-over's retries, requests cut off by the pause), and a count would
    # stop before the last partition is read.
    c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "failover-check", "enable.auto.commit": False})
    partitions = c.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
    ends = {p: c.get_watermark_offsets(ck.TopicPartition(TOPIC, p), timeout=30)[1] for p in partitions}
    c.assign([ck.TopicPartition(TOPIC, p, 0) for p in partitions])
    got, quiet_since = [], time.time()
    left = {p for p, end in ends.items() if end > 0}
    while left and time.time() - quiet_since < 30:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append((m.value().decode(), m.partition(), m.offset()))
        quiet_since = time.time()
        if m.offset() + 1 >= ends[m.partition()]:
            left.discard(m.partition())
    c.close()
    with open(out, "w") as f:
        for value, partition, offset in got:
            f.write(f"{value} {partition} {offset}\n")
    if left:
        sys.exit(f"partitions {sorted(left)} were not read to their ends {ends}")


if PHASE == "produce":
    produce(float(sys.argv[4]), sys.argv[5])
elif PHASE == "read":
    read(sys.argv[4])
else:
    sys.exit(f"unknown phase {PHASE}")
