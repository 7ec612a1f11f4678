"""confluent-kafka (librdkafka) and kafka-python against ringmq's Kafka
listener. Usage: python3 THIS HOST:PORT PHASE, where PHASE is one of
  idempotent  an idempotent acks=all producer, read back by kafka-python
  compressed  each of gzip, snappy, lz4, zstd written by one client, read by the other
  seek        seek to the beginning, the end and a timestamp (kafka-python and confluent)
  group       two confluent members split the partitions and commit, one leaves,
              the other takes over from its commits
  configs     DescribeConfigs of a topic (both clients), and of one that does not exist
  topic_configs  a topic's own configs: set at creation, described with their source,
              changed by IncrementalAlterConfigs (confluent) and AlterConfigs
              (kafka-python), bad ones refused, and each enforced: a record past
              max.message.bytes refused and nothing stored, retention.ms empties
              the partition, LogAppendTime stamps the broker's time,
              min.insync.replicas above the replicas refuses acks=all sends
  delete_records  DeleteRecords moves a partition's start; consumers read from it
  legacy_admin  kafka-python's admin: partitions added, ACLs created, described and
              deleted (a rule for one host refused)
  transactional  a librdkafka transactional producer commits (with a consumer group's
              offsets) and aborts; a read_committed consumer reads exactly the
              committed records in order, and the group's offset is the committed one
  metadata    an offset commit's metadata, written by each client and read back by
              both; metadata past the broker's limit is refused and stores nothing
  autocreate_on   a producer to a missing topic creates it (one partition), as Kafka's default
  autocreate_off  with the broker's auto-create off, it is not created and the send fails
  static      a static member (group.instance.id) restarted within its session gets
              its partition back and the other member sees no rebalance
  groups_admin  both admin clients list, describe and delete groups: a live group
              (members and their assignments), an empty one (offsets only), one
              with members refused deletion, an unknown one not found
  exact       records of every shape (null and empty keys and values, repeated
              headers, null header values, timestamps before the batch's first),
              uncompressed and in each codec, written by each client and read
              back by both exactly as sent
  compaction  a compacted topic (cleanup.policy=compact, its compaction configs
              described): keyed records over several segments and tombstones;
              the compactor leaves each live key's latest record at the offset it
              was written at, drops the deleted keys (delete.retention.ms=0), and
              both clients read the queue with its gaps
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
    assert not limit.is_read_only and int(limit.value) > 0, limit
    assert entries["segment.bytes"].is_read_only, entries["segment.bytes"]
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
    print("configs: max.message.bytes %s (settable), unknown topic refused, kafka-python sees %d" % (limit.value, len(names)))


def described(admin, topic):
    from confluent_kafka.admin import ConfigResource
    [future] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    return future.result(30)


def alter_incremental(admin, topic, *ops):
    from confluent_kafka.admin import ConfigResource, ConfigEntry, AlterConfigOpType
    entries = [ConfigEntry(name, value, incremental_operation=getattr(AlterConfigOpType, op)) for (op, name, value) in ops]
    [future] = admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=entries)]).values()
    return future.result(30)


def refused_code(call):
    try:
        call()
    except ck.KafkaException as e:
        return e.args[0].code()
    raise AssertionError("not refused")


def watermarks(topic, partition=0):
    c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "wm"})
    low, high = c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=30)
    c.close()
    return low, high


def topic_configs():
    from confluent_kafka.admin import ConfigSource
    admin = AdminClient({"bootstrap.servers": BOOT})
    # segment.bytes has no per-topic meaning here: left out, as Kafka Streams sets it.
    new = NewTopic("tc", 1, 1, config={"max.message.bytes": "2000", "retention.ms": "3600000",
                                       "segment.bytes": "1048576"})
    for f in admin.create_topics([new]).values():
        f.result(30)
    entries = described(admin, "tc")
    assert entries["max.message.bytes"].value == "2000", entries["max.message.bytes"]
    assert entries["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, entries["max.message.bytes"]
    assert entries["message.timestamp.type"].source == ConfigSource.DEFAULT_CONFIG.value, entries["message.timestamp.type"]

    p = ck.Producer({"bootstrap.servers": BOOT, "message.timeout.ms": 10000})
    outcome = {}
    # One batch each: the limit is a batch's, as Kafka's.
    p.produce("tc", value=b"x" * 3000, on_delivery=lambda err, msg: outcome.update(big=err))
    p.flush(30)
    p.produce("tc", value=b"small", on_delivery=lambda err, msg: outcome.update(small=err))
    p.flush(30)
    assert outcome["big"] is not None and outcome["big"].code() == ck.KafkaError.MSG_SIZE_TOO_LARGE, outcome
    assert outcome["small"] is None, outcome
    assert watermarks("tc") == (0, 1), "the refused record stored nothing: %r" % (watermarks("tc"),)

    alter_incremental(admin, "tc", ("SET", "message.timestamp.type", "LogAppendTime"),
                      ("DELETE", "max.message.bytes", None), ("APPEND", "cleanup.policy", "compact"))
    entries = described(admin, "tc")
    assert entries["message.timestamp.type"].value == "LogAppendTime", entries["message.timestamp.type"]
    assert entries["max.message.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value, entries["max.message.bytes"]
    assert entries["cleanup.policy"].value == "compact,delete", entries["cleanup.policy"]
    before = int(time.time() * 1000)
    # Keyed from here: the topic compacts (compact,delete), which needs a key on every record.
    p.produce("tc", key=b"k", value=b"x" * 3000, timestamp=1000,
              on_delivery=lambda err, msg: outcome.update(stamped=msg.timestamp()))
    assert p.flush(30) == 0
    kind, ts = outcome["stamped"]
    assert kind == ck.TIMESTAMP_LOG_APPEND_TIME and ts >= before, ("the produce response's time", kind, ts)
    c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "tc-read", "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition("tc", 0, 1)])
    m = None
    deadline = time.time() + 30
    while m is None and time.time() < deadline:
        m = c.poll(0.5)
    c.close()
    assert m is not None and m.error() is None and len(m.value()) == 3000, m
    kind, ts = m.timestamp()
    assert kind == ck.TIMESTAMP_LOG_APPEND_TIME and ts >= before, (kind, ts, before)

    for op, name, value in [("SET", "retention.ms", "soon"), ("SET", "segment.bytes", "1"), ("SET", "no.such", "1"),
                            ("APPEND", "retention.ms", "1")]:
        code = refused_code(lambda: alter_incremental(admin, "tc", (op, name, value)))
        assert code == ck.KafkaError.INVALID_CONFIG, (name, code)
    assert described(admin, "tc")["retention.ms"].value == "3600000", "a refused change changed nothing"

    from kafka.admin import ConfigResource as Resource, ConfigResourceType
    legacy = kafka.admin.KafkaAdminClient(bootstrap_servers=BOOT, api_version=V)
    response = legacy.alter_configs([Resource(ConfigResourceType.TOPIC, "tc", configs={"retention.ms": "1000"})])
    assert [r[0] for r in response.resources] == [0], response
    entries = described(admin, "tc")
    assert entries["retention.ms"].value == "1000", entries["retention.ms"]
    assert entries["message.timestamp.type"].value == "CreateTime", "AlterConfigs replaces the whole set"
    deadline = time.time() + 60
    while watermarks("tc")[0] < 2 and time.time() < deadline:
        time.sleep(0.2)
    assert watermarks("tc") == (2, 2), "retention.ms emptied the partition: %r" % (watermarks("tc"),)

    response = legacy.alter_configs([Resource(ConfigResourceType.TOPIC, "tc", configs={"min.insync.replicas": "2"})])
    assert [r[0] for r in response.resources] == [0], response
    # Retried until its timeout otherwise (the error is retriable): the broker's code once.
    p = ck.Producer({"bootstrap.servers": BOOT, "acks": "all", "retries": 0})
    p.produce("tc", key=b"k", value=b"needs two", on_delivery=lambda err, msg: outcome.update(insync=err))
    p.flush(30)
    assert outcome["insync"] is not None and outcome["insync"].code() == ck.KafkaError.NOT_ENOUGH_REPLICAS, outcome
    assert watermarks("tc")[1] == 2, "nothing stored while too few replicas were in sync"
    response = legacy.alter_configs([Resource(ConfigResourceType.TOPIC, "tc", configs={"cleanup.policy": "keep"})])
    assert [r[0] for r in response.resources] == [40], response
    legacy.close()
    print("topic configs: set at creation, described, altered both ways, bad ones refused, each enforced")


def delete_records():
    create("dr", 2)
    produce_confluent("dr", 20)
    admin = AdminClient({"bootstrap.servers": BOOT})
    highs = [watermarks("dr", p)[1] for p in (0, 1)]
    assert all(h >= 3 for h in highs), highs
    asked = [ck.TopicPartition("dr", 0, 3), ck.TopicPartition("dr", 1, -1)]
    done = {tp.partition: f.result(30) for tp, f in admin.delete_records(asked).items()}
    assert done[0].low_watermark == 3 and done[1].low_watermark == highs[1], done
    assert watermarks("dr", 0) == (3, highs[0]) and watermarks("dr", 1) == (highs[1], highs[1])
    past = admin.delete_records([ck.TopicPartition("dr", 0, highs[0] + 1)])
    [f] = past.values()
    try:
        f.result(30)
        raise AssertionError("a delete past the end was taken")
    except ck.KafkaException as e:
        assert e.args[0].code() == ck.KafkaError.OFFSET_OUT_OF_RANGE, e
    got = read_kafka_python("dr", highs[0] - 3)
    assert sorted(o for (p, o, _, _) in got.values()) == list(range(3, highs[0])), got
    print("delete records: starts moved to 3 and the end, past the end refused, consumers read from the start")


def transactional():
    create("ctx-in", 1)
    create("ctx-out", 2)
    produce_confluent("ctx-in", 10)
    p = ck.Producer({"bootstrap.servers": BOOT, "transactional.id": "ctx", "linger.ms": 5})
    p.init_transactions(30)
    group = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "ctx-group", "enable.auto.commit": False})
    p.begin_transaction()
    for i in range(8):
        p.produce("ctx-out", value=b"c%d" % i, partition=i % 2)
    p.send_offsets_to_transaction([ck.TopicPartition("ctx-in", 0, 7)], group.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce("ctx-out", value=b"a%d" % i, partition=i % 2)
    p.send_offsets_to_transaction([ck.TopicPartition("ctx-in", 0, 9)], group.consumer_group_metadata(), 30)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(8, 12):
        p.produce("ctx-out", value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)
    transactional_read()
    [at] = group.committed([ck.TopicPartition("ctx-in", 0)], 10)
    assert at.offset == 7, at
    group.close()
    print("transactional: committed and aborted, read_committed read 12 of 16 in order, offsets committed")


def transactional_read():
    """What `transactional` wrote, as each isolation reads it."""
    got = read_values("ctx-out", 2, "read_committed", 12)
    expected = [b"c%d" % i for i in range(0, 12, 2)] + [b"c%d" % i for i in range(1, 12, 2)]
    assert got == expected, got
    everything = read_values("ctx-out", 2, "read_uncommitted", 16)
    assert len(everything) == 16 and all(b"a%d" % i in everything for i in range(4)), everything
    print("transactional read: read_committed 12 of 16 in order, read_uncommitted all 16")


def read_values(topic, partitions, isolation, n):
    """Every value of the topic's partitions from their start, partition by partition."""
    c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "read-%s-%s" % (topic, isolation),
                     "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    by_partition = {p: [] for p in range(partitions)}
    deadline, seen = time.time() + 30, 0
    while seen < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            by_partition[m.partition()].append(m.value())
            seen += 1
    # A last poll: nothing more may come.
    m = c.poll(1.0)
    if m is not None and not m.error():
        by_partition[m.partition()].append(m.value())
    c.close()
    return [v for p in range(partitions) for v in by_partition[p]]


BASE_TS = 1_700_000_000_000
# (key, value, headers, timestamp): every shape a Kafka record can take.
SHAPES = [
    (None, None, [], BASE_TS),
    (b"", b"", [], BASE_TS + 1),
    (b"k", b"v", [("a", b"1"), ("a", b"2"), ("n", None), ("e", b"")], BASE_TS + 2),
    (None, b"x", [("a", b"3")], BASE_TS - 5000),
    (b"t", None, [("n", None), ("n", None)], BASE_TS + 86_400_000),
]


def expect_shapes(got, who, shapes=SHAPES):
    want = [(k, v, h, t) for (k, v, h, t) in shapes]
    assert got == want, "%s read\n%r\nwant\n%r" % (who, got, want)


def read_shapes_kafka_python(topic, count=len(SHAPES)):
    c = kafka.KafkaConsumer(bootstrap_servers=BOOT, api_version=(2, 1, 0), group_id=None,
                            auto_offset_reset="earliest", consumer_timeout_ms=10000)
    c.assign([kafka.TopicPartition(topic, 0)])
    got = []
    for m in c:
        got.append((m.key, m.value, [(n, v) for (n, v) in m.headers], m.timestamp))
        if len(got) == count:
            break
    c.close()
    return got


def read_shapes_confluent(topic, count=len(SHAPES)):
    c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "exact-" + topic, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    got, deadline = [], time.time() + 30
    while len(got) < count and time.time() < deadline:
        m = c.poll(1.0)
        if m is None or m.error():
            continue
        got.append((m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]))
    c.close()
    return got


def exact():
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        create("x-c-" + codec, 1)
        p = ck.Producer({"bootstrap.servers": BOOT, "compression.type": codec, "linger.ms": 50})
        for (k, v, h, t) in SHAPES:
            p.produce("x-c-" + codec, key=k, value=v, headers=h, timestamp=t, partition=0)
        assert p.flush(30) == 0
        expect_shapes(read_shapes_kafka_python("x-c-" + codec), "kafka-python from confluent " + codec)
        expect_shapes(read_shapes_confluent("x-c-" + codec), "confluent from confluent " + codec)
        create("x-k-" + codec, 1)
        p = kafka.KafkaProducer(bootstrap_servers=BOOT, api_version=(2, 1, 0), linger_ms=50,
                                compression_type=None if codec == "none" else codec)
        # kafka-python refuses a record with neither key nor value, and a null header value.
        shapes = [(k, v, [(n, x) for (n, x) in h if x is not None], t) for (k, v, h, t) in SHAPES[1:]]
        for (k, v, h, t) in shapes:
            p.send("x-k-" + codec, key=k, value=v, headers=h, timestamp_ms=t, partition=0)
        p.flush()
        p.close()
        got = read_shapes_confluent("x-k-" + codec, len(shapes))
        expect_shapes(got, "confluent from kafka-python " + codec, shapes)
        got = read_shapes_kafka_python("x-k-" + codec, len(shapes))
        expect_shapes(got, "kafka-python from kafka-python " + codec, shapes)
        print("exact %s: %d shapes, each client to both" % (codec, len(SHAPES)))


def metadata():
    create("m", 1)
    tp = kafka.TopicPartition("m", 0)
    kp = kafka.KafkaConsumer(bootstrap_servers=BOOT, api_version=V, group_id="meta-k", enable_auto_commit=False)
    kp.assign([tp])
    kp.commit({tp: kafka.structs.OffsetAndMetadata(5, "checkpoint-a")})
    assert kp.committed(tp, metadata=True) == kafka.structs.OffsetAndMetadata(5, "checkpoint-a")
    cc = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "meta-k", "enable.auto.commit": False})
    [back] = cc.committed([ck.TopicPartition("m", 0)], 10)
    assert (back.offset, back.metadata) == (5, "checkpoint-a"), back
    cc.close()
    cc = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "meta-c", "enable.auto.commit": False})
    cc.assign([ck.TopicPartition("m", 0, 0)])
    cc.commit(offsets=[ck.TopicPartition("m", 0, 7, "checkpoint-b")], asynchronous=False)
    [back] = cc.committed([ck.TopicPartition("m", 0)], 10)
    assert (back.offset, back.metadata) == (7, "checkpoint-b"), back
    cc.close()
    kp2 = kafka.KafkaConsumer(bootstrap_servers=BOOT, api_version=V, group_id="meta-c", enable_auto_commit=False)
    # confluent-kafka-python sends the metadata's C string with its NUL, and the broker keeps every byte.
    got = kp2.committed(tp, metadata=True)
    assert got == kafka.structs.OffsetAndMetadata(7, "checkpoint-b\x00"), got
    try:
        kp.commit({tp: kafka.structs.OffsetAndMetadata(9, "x" * 5000)})
        raise AssertionError("metadata past the limit was taken")
    except kafka.errors.OffsetMetadataTooLargeError:
        pass
    assert kp.committed(tp, metadata=True) == kafka.structs.OffsetAndMetadata(5, "checkpoint-a"), "nothing stored"
    kp.close()
    kp2.close()
    print("metadata: each client's commit metadata read back by both; too large refused")


def autocreate_on():
    p = ck.Producer({"bootstrap.servers": BOOT})
    delivered = []
    p.produce("made-by-a-send", value=b"first", on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(30) == 0 and delivered == [None], delivered
    admin = AdminClient({"bootstrap.servers": BOOT})
    topic = admin.list_topics(timeout=10).topics["made-by-a-send"]
    assert topic.error is None and len(topic.partitions) == 1, topic
    kp = kafka.KafkaProducer(bootstrap_servers=BOOT, api_version=V)
    kp.send("made-by-kafka-python", b"first").get(timeout=30)
    kp.close()
    print("auto-create: created with 1 partition by confluent and kafka-python")


def autocreate_off():
    p = ck.Producer({"bootstrap.servers": BOOT, "message.timeout.ms": 3000})
    delivered = []
    p.produce("never-made", value=b"first", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(30)
    assert len(delivered) == 1 and delivered[0] is not None, delivered
    admin = AdminClient({"bootstrap.servers": BOOT})
    assert "never-made" not in admin.list_topics(timeout=10).topics
    print("auto-create off: not created, the send failed with %s" % delivered[0].name())


def static():
    create("st", 2)
    events = {}

    def member(instance, name):
        c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "static", "group.instance.id": instance,
                         "session.timeout.ms": 30000, "auto.offset.reset": "earliest"})
        on_assign = lambda _, ps: events.setdefault(name, []).append(("assign", sorted(p.partition for p in ps)))
        on_revoke = lambda _, ps: events.setdefault(name, []).append(("revoke", sorted(p.partition for p in ps)))
        c.subscribe(["st"], on_assign=on_assign, on_revoke=on_revoke)
        return c

    def poll_until(what, consumers, done, limit=30):
        deadline = time.time() + limit
        while not done() and time.time() < deadline:
            for c in consumers:
                c.poll(0.1)
        assert done(), "%s: %r" % (what, events)

    parts = lambda c: sorted(p.partition for p in c.assignment())
    a, b = member("ia", "a"), member("ib", "b")
    poll_until("a and b split the partitions", [a, b], lambda: len(parts(a)) == 1 and len(parts(b)) == 1)
    held = parts(a)
    seen_by_b = list(events["b"])
    a.close()  # a static member leaves no LeaveGroup behind
    a2 = member("ia", "a2")
    poll_until("a's restart gets its partition", [a2, b], lambda: len(parts(a2)) == 1)
    assert parts(a2) == held, (parts(a2), held)
    end = time.time() + 3
    while time.time() < end:
        b.poll(0.1)
        a2.poll(0.1)
    assert events["b"] == seen_by_b, "b saw a rebalance: %r then %r" % (seen_by_b, events["b"])
    a2.close()
    b.close()
    print("static: the restarted member got partition %s back, no rebalance for the other" % held)


def groups_admin():
    from confluent_kafka.admin import AdminClient as CAdmin
    create("ga", 2)
    produce_confluent("ga", 10)
    live = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "ga-live", "auto.offset.reset": "earliest",
                        "client.id": "live-client"})
    live.subscribe(["ga"])
    deadline = time.time() + 30
    while not live.assignment() and time.time() < deadline:
        live.poll(0.5)
    assert len(live.assignment()) == 2, live.assignment()
    idle = kafka.KafkaConsumer(bootstrap_servers=BOOT, api_version=V, group_id="ga-idle", enable_auto_commit=False)
    idle.assign([kafka.TopicPartition("ga", 0)])
    idle.commit({kafka.TopicPartition("ga", 0): kafka.structs.OffsetAndMetadata(4, "")})
    idle.close()

    kadmin = kafka.KafkaAdminClient(bootstrap_servers=BOOT, api_version=V)
    listed = dict(kadmin.list_consumer_groups())
    assert listed.get("ga-live") == "consumer" and "ga-idle" in listed, listed
    [d] = kadmin.describe_consumer_groups(["ga-live"])
    assert d.state == "Stable" and len(d.members) == 1, d
    member = d.members[0]
    assert member.client_id == "live-client", member
    parts = sorted(p for (t, ps) in member.member_assignment.assignment for p in ps)
    assert parts == [0, 1], member.member_assignment
    offsets = kadmin.list_consumer_group_offsets("ga-idle")
    assert offsets[kafka.TopicPartition("ga", 0)].offset == 4, offsets

    cadmin = CAdmin({"bootstrap.servers": BOOT})
    valid = {g.group_id: g for g in cadmin.list_consumer_groups().result(30).valid}
    assert {"ga-live", "ga-idle"} <= set(valid), valid
    [desc] = cadmin.describe_consumer_groups(["ga-live"]).values()
    desc = desc.result(30)
    assert len(desc.members) == 1 and len(desc.members[0].assignment.topic_partitions) == 2, desc
    [f] = cadmin.delete_consumer_groups(["ga-live"]).values()
    try:
        f.result(30)
        raise AssertionError("a group with members was deleted")
    except ck.KafkaException as e:
        assert e.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP, e
    [f] = cadmin.delete_consumer_groups(["ga-idle"]).values()
    f.result(30)
    assert kadmin.list_consumer_group_offsets("ga-idle") == {}, "the deleted group's offsets are gone"
    assert "ga-idle" not in dict(kadmin.list_consumer_groups()), "and so is the group"
    result = kadmin.delete_consumer_groups(["ga-nope"])
    assert result[0][1].__name__ == "GroupIdNotFoundError", result
    live.close()
    kadmin.close()
    print("groups admin: listed, described, deleted; with members refused; unknown not found")


def read_keyed_confluent(topic):
    """Every record of partition 0 from its start to its end: {offset: (key, value)}."""
    low, high = watermarks(topic)
    c = ck.Consumer({"bootstrap.servers": BOOT, "group.id": "reader", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got, deadline = {}, time.time() + 30
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got[m.offset()] = (m.key(), m.value())
            if m.offset() == high - 1:
                break
    c.close()
    return low, high, got


def compaction():
    from confluent_kafka.admin import ConfigSource
    admin = AdminClient({"bootstrap.servers": BOOT})
    configs = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"}
    for f in admin.create_topics([NewTopic("kv", 1, 1, config=configs)]).values():
        f.result(30)
    entries = described(admin, "kv")
    for name, value in configs.items():
        assert entries[name].value == value and entries[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, entries[name]
    assert entries["min.compaction.lag.ms"].value == "0", entries["min.compaction.lag.ms"]
    p = ck.Producer({"bootstrap.servers": BOOT, "acks": "all", "linger.ms": 5, "batch.size": 65536})
    written, failed = {}, []

    def report(err, msg):
        if err:
            failed.append(err)
        else:
            written[msg.offset()] = (msg.key(), msg.value())

    pad = b"x" * 900
    # 3,000 records over 20 keys (about 3 MB: the broker's 2 MiB segments roll),
    # then tombstones of keys 0-4, then 2,500 more of keys 10-19 so the
    # tombstones lie in sealed segments.
    for i in range(3000):
        p.produce("kv", key=b"k%d" % (i % 20), value=b"v%d-" % i + pad, partition=0, on_delivery=report)
    for k in range(5):
        p.produce("kv", key=b"k%d" % k, value=None, partition=0, on_delivery=report)
    for i in range(3000, 5500):
        p.produce("kv", key=b"k%d" % (10 + i % 10), value=b"v%d-" % i + pad, partition=0, on_delivery=report)
    assert p.flush(60) == 0 and not failed, failed
    latest = {}
    for offset in sorted(written):
        key, value = written[offset]
        latest[key] = (offset, value)
    live = {k: v for k, v in latest.items() if v[1] is not None}
    deadline = time.time() + 90
    while True:
        low, high, got = read_keyed_confluent("kv")
        assert (low, high) == (0, 5505), (low, high)
        # Every live key's latest record is there, where it was written, as written.
        for key, (offset, value) in live.items():
            assert got.get(offset) == (key, value), (key, offset, got.get(offset))
        for offset, (key, value) in got.items():
            assert written[offset] == (key, value), (offset, key)
        compacted_below = min(o for o, _ in live.values())
        old = [o for o in got if o < compacted_below and latest[got[o][0]][0] != o]
        gone = [k for k in range(5) if any(got[o][0] == b"k%d" % k for o in got)]
        if not old and not gone:
            break
        assert time.time() < deadline, "not compacted in time: %d records read, %d superseded, keys %s still there" % (len(got), len(old), gone)
        time.sleep(1)
    # kafka-python reads the same records across the gaps.
    reader = kafka.KafkaConsumer(bootstrap_servers=BOOT, api_version=V, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=5000)
    reader.assign([kafka.TopicPartition("kv", 0)])
    legacy = {m.offset: (m.key, m.value) for m in reader}
    reader.close()
    assert set(legacy) >= {o for o, _ in live.values()}, sorted(set(o for o, _ in live.values()) - set(legacy))
    assert all(written[o] == kv for o, kv in legacy.items())
    print("compaction: %d of 5505 records left, the latest of %d live keys at their offsets, 5 deleted keys gone, kafka-python reads %d"
          % (len(got), len(live), len(legacy)))


def legacy_admin():
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, NewPartitions, ResourcePattern,
                             ResourcePatternFilter, ResourceType, ACLResourcePatternType)
    create("la", 1)
    admin = kafka.KafkaAdminClient(bootstrap_servers=BOOT, api_version=V)
    admin.create_partitions({"la": NewPartitions(3)})
    c = kafka.KafkaConsumer(bootstrap_servers=BOOT, api_version=V)
    deadline = time.time() + 30
    while len(c.partitions_for_topic("la") or ()) != 3 and time.time() < deadline:
        time.sleep(0.2)
        c.topics()
    assert c.partitions_for_topic("la") == {0, 1, 2}, c.partitions_for_topic("la")
    c.close()
    pattern = ResourcePattern(ResourceType.TOPIC, "la", ACLResourcePatternType.LITERAL)
    rule = ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
    one_host = ACL("User:bob", "10.0.0.1", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
    made = admin.create_acls([rule, one_host])
    assert [a for a in made["succeeded"]] == [rule] and [f[0] for f in made["failed"]] == [one_host], made
    any_topic = ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY))
    described, error = admin.describe_acls(any_topic)
    assert error.errno == 0 and len(described) == 1 and described[0].operation == ACLOperation.READ, (described, error)
    [(_, deleted, error)] = admin.delete_acls([any_topic])
    assert error.errno == 0 and len(deleted) == 1, (deleted, error)
    assert admin.describe_acls(any_topic)[0] == []
    admin.close()
    print("legacy admin: 3 partitions, ACLs created, described and deleted, one host refused")


PHASES = {"idempotent": idempotent, "compressed": compressed, "seek": seek, "group": group, "configs": configs}
PHASES["transactional"] = transactional
PHASES["transactional_read"] = transactional_read
PHASES["exact"] = exact
PHASES["metadata"] = metadata
PHASES["groups_admin"] = groups_admin
PHASES["static"] = static
PHASES["autocreate_on"] = autocreate_on
PHASES["autocreate_off"] = autocreate_off
PHASES["topic_configs"] = topic_configs
PHASES["delete_records"] = delete_records
PHASES["legacy_admin"] = legacy_admin
PHASES["compaction"] = compaction
PHASES[PHASE]()
