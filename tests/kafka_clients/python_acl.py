"""ACLs as stock Kafka clients meet them. Usage: python3 THIS HOST:PORT PHASE,
logged in as alice (SCRAM-SHA-256, password alice-pw) over SASL_PLAINTEXT:
  none     no ACL: no topic is listed, produce and create are refused
  granted  Write+Read on orders, Read on group g1, Create on the cluster,
           Delete on alice-*: produce, a g1 member, create and delete work;
           group g2 and topic secret are refused
  denied   a deny of Read on orders beats the allow: consuming is refused
Prints what it checked; a failed check exits non-zero."""
import sys
import uuid
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
import kafka
import kafka.errors

BOOT, PHASE = sys.argv[1], sys.argv[2]
LOGIN = {"bootstrap.servers": BOOT, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256",
         "sasl.username": "alice", "sasl.password": "alice-pw"}
PY_LOGIN = dict(bootstrap_servers=BOOT, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username="alice", sasl_plain_password="alice-pw", api_version=(2, 0))


def produce(topic):
    """The delivery error's name, or None once stored."""
    producer = ck.Producer({**LOGIN, "acks": "all", "message.timeout.ms": 10000})
    reports = []
    producer.produce(topic, b"m", partition=0, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    return reports[0].name() if reports and reports[0] else None


def listed():
    topics = AdminClient(LOGIN).list_topics(timeout=10).topics
    return sorted(t for t in topics if not t.startswith("%"))


def consume(topic, group):
    """The first message's value, or the name of the error the consumer got."""
    consumer = ck.Consumer({**LOGIN, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        for _ in range(30):
            m = consumer.poll(1)
            if m is None:
                continue
            if m.error():
                return m.error().name()
            consumer.commit(m, asynchronous=False)
            return m.value()
        return "nothing"
    except ck.KafkaException as e:
        return e.args[0].name()
    finally:
        consumer.close()


def create(name):
    admin = AdminClient(LOGIN)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
        return None
    except ck.KafkaException as e:
        return e.args[0].name()


def delete(name):
    admin = AdminClient(LOGIN)
    try:
        admin.delete_topics([name])[name].result(15)
        return None
    except ck.KafkaException as e:
        return e.args[0].name()


def python_topics():
    consumer = kafka.KafkaConsumer(**PY_LOGIN)
    topics = consumer.topics()
    consumer.close()
    return sorted(t for t in topics if not t.startswith("%"))


if PHASE == "none":
    assert listed() == [], listed()
    assert python_topics() == [], python_topics()
    assert produce("orders") == "TOPIC_AUTHORIZATION_FAILED", produce("orders")
    assert create("alice-t") == "TOPIC_AUTHORIZATION_FAILED", create("alice-t")
    print("no ACL: no topic listed (confluent, kafka-python); produce and create refused")
elif PHASE == "granted":
    assert listed() == ["orders"], listed()
    assert python_topics() == ["orders"], python_topics()
    assert produce("orders") is None
    assert produce("secret") == "TOPIC_AUTHORIZATION_FAILED"
    assert consume("orders", "g1") == b"m", "a g1 member reads orders"
    got = consume("orders", "g2")
    assert got == "GROUP_AUTHORIZATION_FAILED", got
    name = f"alice-{uuid.uuid4().hex[:8]}"
    assert create(name) is None, "Create on the cluster"
    assert delete("orders") == "TOPIC_AUTHORIZATION_FAILED"
    assert delete(name) is None, "Delete on alice-*"
    print("granted: produce, a g1 member, create and delete work; secret, g2 and deleting orders are refused")
elif PHASE == "denied":
    got = consume("orders", "g1")
    assert got == "TOPIC_AUTHORIZATION_FAILED", got
    assert produce("orders") is None, "Write is still allowed"
    print("denied: the deny of Read on orders beats the allow; Write still works")
else:
    sys.exit(f"unknown phase {PHASE}")
