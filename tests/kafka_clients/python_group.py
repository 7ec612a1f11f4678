"""kafka-python consumer group against ringmq's Kafka listener: member a
takes all 4 partitions, b joins and they split them, both commit after every
poll, b leaves and a takes its partitions over from b's commits. Every
message is read once. Usage: python3 THIS HOST:PORT
Prints the phases and, last, the group's committed offset of each partition."""
import sys
import threading
import time
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

BOOT, V, TOPIC, GROUP = sys.argv[1], (2, 0), "pg", "pyg"
ALL = [0, 1, 2, 3]
KafkaAdminClient(bootstrap_servers=BOOT, api_version=V).create_topics([NewTopic(TOPIC, 4, 1)])
producer = KafkaProducer(bootstrap_servers=BOOT, api_version=V, acks="all")
lock = threading.Lock()
seen, assigned, stops, threads = [], {}, {}, {}


def produce(start, n):
    for i in range(start, start + n):
        producer.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i)
    producer.flush()


def member(name):
    c = KafkaConsumer(TOPIC, bootstrap_servers=BOOT, api_version=V, group_id=GROUP, client_id=name,
                      auto_offset_reset="earliest", enable_auto_commit=False)
    while not stops[name].is_set():
        batch = c.poll(timeout_ms=200)
        with lock:
            assigned[name] = sorted(tp.partition for tp in c.assignment())
            for tp, messages in batch.items():
                seen.extend((name, tp.partition, m.offset, m.value) for m in messages)
        if batch:
            c.commit()
    c.close()  # LeaveGroup


def start(name):
    stops[name] = threading.Event()
    threads[name] = threading.Thread(target=member, args=(name,))
    threads[name].start()


def stop(name):
    stops[name].set()
    threads[name].join(60)


def wait(what, ready, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        with lock:
            if ready():
                print(what, dict(assigned), flush=True)
                return
        time.sleep(0.1)
    raise SystemExit("timed out waiting for %s: assigned %s, %d seen" % (what, assigned, len(seen)))


def distinct():
    return len({(p, o) for _, p, o, _ in seen})


produce(0, 400)
start("a")
wait("a alone", lambda: assigned.get("a") == ALL and distinct() >= 400)
start("b")
split = lambda: assigned.get("a") and assigned.get("b") and sorted(assigned["a"] + assigned["b"]) == ALL
wait("split", split)
produce(400, 400)
wait("split consumed", lambda: distinct() >= 800)
stop("b")
wait("a took over", lambda: assigned.get("a") == ALL)
produce(800, 200)
wait("all consumed", lambda: distinct() >= 1000)
stop("a")

values = sorted(int(v[1:]) for _, _, _, v in seen)
assert values == list(range(1000)), "every message once: %d read, %d distinct" % (len(values), len(set(values)))
readers = {}
for name, p, o, _ in seen:
    readers.setdefault(p, set()).add(name)
print("members per partition", {p: sorted(r) for p, r in sorted(readers.items())})
assert any(r == {"a", "b"} for r in readers.values()), "b read some partition and a took it over"
check = KafkaConsumer(bootstrap_servers=BOOT, api_version=V, group_id=GROUP, enable_auto_commit=False)
for p in ALL:
    print("committed %d %d" % (p, check.committed(TopicPartition(TOPIC, p))), flush=True)
