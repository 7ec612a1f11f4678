"""confluent-kafka (librdkafka) and kafka-python against ringmq's Kafka
listener. Usage: python3 THIS HOST:PORT PHASE, where PHASE is one of
  idempotent  an idempotent acks=all producer, read back by kafka-python
  compressed  each of gzip, snappy, lz4, zstd written by one client, read by the other
  seek        seek to the beginning, the end and a timestamp (kafka-python and confluent)
  group       two confluent members split the partitions and commit, one leaves,
              the other takes over from its commits
  configs     DescribeConfigs of a topic (both clients), and of one that does not exist
  transactional  a transactional producer is refused at once with a final error
              (transactions are not served yet), not left to retry until its timeout
Each phase prints what it checked; any failed check exits non-zero."""
import sys
import time
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
import kafka

BOOT, PHASE = sys.argv[1], sys.argv[2]
V = (2, 0)


def create(name, partitions):
    admin = AdminClient({"bootstrap.servers": BOOT})  # kept until the futures resolve
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def produce_confluent(topic, n, **config):
    p = ck.Producer({"bootstrap.servers": BOOT, **config})
    failed, offsets = [], {}

    def report(err, msg):
        if err:
            failed.append(err)
        else:
            offsets[msg.value()] = (msg.partition(), msg.offset())

    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("n", b"%d" % i)], on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0, "unflushed messages"
    assert not failed, failed[:3]
    return offsets


def read_kafka_python(topic, n):
    c = kafka.KafkaConsumer(topic, bootstrap_servers=BOOT, api_version=V, group_id=None,
                            auto_offset_reset="earliest", consumer_timeout_ms=5000)
    got = {}
    for m in c:
        got[m.value] = (m.partition, m.offset, m.key, dict(m.headers))
        if len(got) >= n:
            break
    c.close()
    return got


def read_confluent(topic, n, group):
    c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = {}, time.time() + 60
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got[m.value()] = (m.partition(), m.offset(), m.key())
    c.close()
    return got


def idempotent():
    create("idem", 3)
    offsets = produce_confluent("idem", 3000, **{"enable.idempotence": True, "acks": "all"})
    got = read_kafka_python("idem", 3000)
    assert len(got) == 3000, len(got)
    for value, (p, o, key, headers) in got.items():
        assert offsets[value] == (p, o), (value, offsets[value], p, o)
        assert key[1:] == value[1:] and headers == {"n": value[1:]}, (key, value, headers)
    print("idempotent: 3000 acked, read back at their offsets with keys and headers")


def compressed():
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        create("c-" + codec, 2)
        produce_confluent("c-" + codec, 500, **{"compression.type": codec, "linger.ms": 20})
        got = read_kafka_python("c-" + codec, 500)
        assert sorted(got) == sorted(b"v%d" % i for i in range(500)), (codec, len(got))
        create("k-" + codec, 2)
        # kafka-python sends zstd only to brokers it takes for 2.1 or newer (Produce v7).
        version = (2, 1, 0) if codec == "zstd" else V
        p = kafka.KafkaProducer(bootstrap_servers=BOOT, api_version=version, compression_type=codec, linger_ms=20)
        for i in range(500):
            p.send("k-" + codec, key=b"k%d" % i, value=b"v%d" % i)
        p.flush()
        p.close()
        got = read_confluent("k-" + codec, 500, "g-" + codec)
        assert sorted(got) == sorted(b"v%d" % i for i in range(500)), (codec, len(got))
        print("compressed %s: confluent -> kafka-python and kafka-python -> confluent, 500 each" % codec)


def seek():
    create("ts", 1)
    p = ck.Producer({"bootstrap.servers": BOOT})
    base = 1_700_000_000_000
    for i in range(1000):
        p.produce("ts", value=b"v%d" % i, partition=0, timestamp=base + 10 * i)
    assert p.flush(60) == 0
    tp = kafka.TopicPartition("ts", 0)
    c = kafka.KafkaConsumer(bootstrap_servers=BOOT, api_version=V, group_id=None)
    c.assign([tp])
    c.seek_to_end(tp)
    assert c.position(tp) == 1000, c.position(tp)
    c.seek_to_beginning(tp)
    assert c.position(tp) == 0, c.position(tp)
    found = c.offsets_for_times({tp: base + 5005})[tp]
    assert found.offset == 501 and found.timestamp == base + 5010, found
    assert c.offsets_for_times({tp: base + 10_000})[tp] is None, "no record at or after the last timestamp"
    c.seek(tp, found.offset)
    first = next(iter(c))
    assert (first.offset, first.value, first.timestamp) == (501, b"v501", base + 5010), first
    cc = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "seek"})
    [t] = cc.offsets_for_times([ck.TopicPartition("ts", 0, base + 2000)], 10)
    assert t.offset == 200, t
    low, high = cc.get_watermark_offsets(ck.TopicPartition("ts", 0), 10)
    assert (low, high) == (0, 1000), (low, high)
    cc.close()
    print("seek: end 1000, beginning 0, timestamp -> 501 (kafka-python) and 200 (confluent)")


def group():
    create("cg", 4)
    produce_confluent("cg", 1000)
    seen, assigned = [], {}

    def member(name):
        def on_assign(consumer, partitions):
            assigned[name] = sorted(p.partition for p in partitions)

        def on_revoke(consumer, partitions):
            assigned[name] = []

        c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "cgroup", "client.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["cg"], on_assign=on_assign, on_revoke=on_revoke)
        return c

    def poll(name, c):
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            seen.append((name, m.partition(), m.offset(), m.value()))
            c.commit(message=m, asynchronous=False)

    def until(what, members, ready, seconds=90):
        deadline = time.time() + seconds
        while not ready():
            assert time.time() < deadline, "timed out waiting for %s: %s, %d seen" % (what, assigned, len(seen))
            for name, c in members:
                poll(name, c)
        print("group:", what, assigned, flush=True)

    distinct = lambda: len({(p, o) for _, p, o, _ in seen})
    a = member("a")
    until("a alone", [("a", a)], lambda: assigned.get("a") == [0, 1, 2, 3] and distinct() >= 300)
    b = member("b")
    split = lambda: sorted(assigned.get("a", []) + assigned.get("b", [])) == [0, 1, 2, 3] and assigned.get("b")
    until("split", [("a", a), ("b", b)], split)
    until("split consumed", [("a", a), ("b", b)], lambda: distinct() >= 1000)
    b.close()
    until("a took over", [("a", a)], lambda: assigned.get("a") == [0, 1, 2, 3])
    produce_confluent("cg", 200)
    until("all consumed", [("a", a)], lambda: distinct() >= 1200)
    a.close()
    pairs = [(p, o) for _, p, o, _ in seen]
    assert len(pairs) == len(set(pairs)) == 1200, "each message once: %d read, %d distinct" % (len(pairs), len(set(pairs)))
    readers = {}
    for name, p, _, _ in seen:
        readers.setdefault(p, set()).add(name)
    assert any(r == {"a", "b"} for r in readers.values()), readers
    print("group: 1200 read once; partitions read by", {p: sorted(r) for p, r in sorted(readers.items())})


def configs():
    from confluent_kafka.admin import ConfigResource
    create("cfg", 2)
    admin = AdminClient({"bootstrap.servers": BOOT})
    [future] = admin.describe_configs([ConfigResource("topic", "cfg")]).values()
    entries = future.result(30)
    limit = entries["max.message.bytes"]
    assert limit.is_read_only and int(limit.value) > 0, limit
    assert entries["cleanup.policy"].value == "delete", entries["cleanup.policy"]
    [missing] = admin.describe_configs([ConfigResource("topic", "nope")]).values()
    try:
        missing.result(30)
        raise SystemExit("a topic that does not exist was described")
    except ck.KafkaException as e:
        assert e.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART, e
    from kafka.admin import ConfigResource as Resource, ConfigResourceType
    legacy = kafka.admin.KafkaAdminClient(bootstrap_servers=BOOT, api_version=V)
    [response] = legacy.describe_configs([Resource(ConfigResourceType.TOPIC, "cfg")])
    names = [entry[0] for entry in response.resources[0][4]]
    assert "retention.ms" in names and "segment.bytes" in names, names
    print("configs: max.message.bytes %s (read-only), unknown topic refused, kafka-python sees %d" % (limit.value, len(names)))


def transactional():
    p = ck.Producer({"bootstrap.servers": BOOT, "transactional.id": "tx-refused"})
    try:
        p.init_transactions(60)
        raise SystemExit("a transactional producer started")
    except ck.KafkaException as e:
        error = e.args[0]
        # A retried FindCoordinator would end in _TIMED_OUT after 60 s instead.
        assert error.code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error
        assert error.fatal() and not error.retriable(), error
        assert "not served" in error.str(), error
        print("transactional: refused at once: %s" % error.str())


PHASES = {"idempotent": idempotent, "compressed": compressed, "seek": seek, "group": group, "configs": configs}
PHASES["transactional"] = transactional
PHASES[PHASE]()
