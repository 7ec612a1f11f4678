"""SASL logins of stock Kafka clients against ringmq's Kafka listener.
Usage: python3 THIS HOST:PORT PROTOCOL [CA_FILE], PROTOCOL SASL_PLAINTEXT or
SASL_SSL. alice's password is alice-secret. Each client logs in with each
mechanism it may use on PROTOCOL, produces and reads back its own message;
a wrong password and an unknown user are refused. Prints what it checked;
a failed check exits non-zero."""
import sys
import uuid
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
import kafka

BOOT, PROTOCOL = sys.argv[1], sys.argv[2]
CA = sys.argv[3] if len(sys.argv) > 3 else None
MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"] + (["PLAIN"] if PROTOCOL == "SASL_SSL" else [])
TOPIC = "logins"


def python_config(mechanism, user, password):
    config = dict(bootstrap_servers=BOOT, security_protocol=PROTOCOL, sasl_mechanism=mechanism,
                  sasl_plain_username=user, sasl_plain_password=password, api_version=(2, 0),
                  request_timeout_ms=10000)
    if CA:
        config["ssl_cafile"] = CA
    return config


def confluent_config(mechanism, user, password):
    config = {"bootstrap.servers": BOOT, "security.protocol": PROTOCOL, "sasl.mechanisms": mechanism,
              "sasl.username": user, "sasl.password": password}
    if CA:
        config["ssl.ca.location"] = CA
    return config


def python_round_trip(mechanism, user, password):
    value = f"kafka-python {mechanism} {uuid.uuid4()}".encode()
    producer = kafka.KafkaProducer(acks="all", **python_config(mechanism, user, password))
    sent = producer.send(TOPIC, value, partition=0).get(timeout=30)
    producer.close()
    consumer = kafka.KafkaConsumer(consumer_timeout_ms=10000, **python_config(mechanism, user, password))
    part = kafka.TopicPartition(TOPIC, 0)
    consumer.assign([part])
    consumer.seek(part, sent.offset)
    got = next(iter(consumer)).value
    consumer.close()
    assert got == value, (got, value)


def confluent_round_trip(mechanism, user, password):
    value = f"confluent {mechanism} {uuid.uuid4()}".encode()
    producer = ck.Producer({**confluent_config(mechanism, user, password), "acks": "all"})
    delivered = []
    producer.produce(TOPIC, value, partition=1, on_delivery=lambda err, msg: delivered.append((err, msg)))
    producer.flush(30)
    err, msg = delivered[0]
    assert err is None, err
    consumer = ck.Consumer({**confluent_config(mechanism, user, password), "group.id": f"g-{uuid.uuid4()}"})
    consumer.assign([ck.TopicPartition(TOPIC, 1, msg.offset())])
    got = consumer.poll(15)
    consumer.close()
    assert got is not None and got.error() is None and got.value() == value, got


def python_refused(mechanism, user, password):
    try:
        producer = kafka.KafkaProducer(max_block_ms=3000, **python_config(mechanism, user, password))
        producer.send(TOPIC, b"never stored", partition=0).get(timeout=5)
    except Exception as e:  # the broker closes the connection: no metadata comes
        return type(e).__name__
    raise AssertionError(f"kafka-python {mechanism} {user} got in")


def confluent_refused(mechanism, user, password):
    admin = AdminClient(confluent_config(mechanism, user, password))
    try:
        admin.list_topics(timeout=3)
    except ck.KafkaException as e:
        return e.args[0].name()
    raise AssertionError(f"confluent {mechanism} {user} got in")


for mechanism in MECHANISMS:
    python_round_trip(mechanism, "alice", "alice-secret")
    confluent_round_trip(mechanism, "alice", "alice-secret")
    print(f"{PROTOCOL} {mechanism}: kafka-python and confluent-kafka logged in, produced and read back")
    if mechanism == "SCRAM-SHA-512":
        continue  # refusals are checked with SCRAM-SHA-256 and PLAIN (each takes a client's timeout)
    for user, password in [("alice", "wrong"), ("mallory", "alice-secret")]:
        print(f"{PROTOCOL} {mechanism} {user}/{password}: refused "
              f"(kafka-python {python_refused(mechanism, user, password)}, "
              f"confluent {confluent_refused(mechanism, user, password)})")
