"""A consume-transform-produce loop with confluent-kafka (librdkafka)
transactions, the shape of every exactly-once pipeline: read topic IN as
group GROUP (read_committed, from the group's committed offsets), write each
record's value, upper-cased, to the same partition of OUT, and commit IN's
offsets in the same transaction. Usage:
  python3 THIS BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID IDLE_SECONDS
It prints "eos: committed N" after each transaction (N: records it moved so
far) and runs until IN has given nothing for IDLE_SECONDS, then prints
"eos: done N". Killed at any point and started again,
OUT ends with every IN record exactly once: a new run's init_transactions
fences the killed one and aborts its open transaction, and reading resumes
from the offsets the last committed transaction stored.
An abortable error (a fail-over under a transaction) aborts the transaction
and the loop goes on from the committed offsets; a fatal one exits 3."""
import sys
import time
import confluent_kafka as ck

BOOT, IN, OUT, GROUP, TXID, IDLE = sys.argv[1:7]


def rewind(consumer, partitions):
    """Back to the group's committed offsets (after an aborted transaction)."""
    committed = consumer.committed(partitions, timeout=30)
    for tp in committed:
        consumer.seek(ck.TopicPartition(IN, tp.partition, tp.offset if tp.offset >= 0 else ck.OFFSET_BEGINNING))


def retrying(call):
    """A transactional call tried again while its error is retriable."""
    while True:
        try:
            return call()
        except ck.KafkaException as e:
            if not e.args[0].retriable():
                raise
            time.sleep(0.1)


def main():
    producer = ck.Producer({"bootstrap.servers": BOOT, "transactional.id": TXID, "linger.ms": 5,
                            "transaction.timeout.ms": 10000, "message.timeout.ms": 10000})
    # First: fence an earlier run and abort its open transaction, so the
    # offsets read next are those of its last committed one.
    producer.init_transactions(60)
    consumer = ck.Consumer({"bootstrap.servers": BOOT, "group.id": GROUP, "isolation.level": "read_committed",
                            "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    partitions = [ck.TopicPartition(IN, p) for p in consumer.list_topics(IN, timeout=30).topics[IN].partitions]
    consumer.assign(partitions)
    moved, idle_since = 0, time.time()
    while time.time() - idle_since < float(IDLE):
        batch = [m for m in consumer.consume(200, 0.5) if not m.error()]
        if not batch:
            continue
        idle_since = time.time()
        producer.begin_transaction()
        try:
            for m in batch:
                producer.produce(OUT, value=m.value().upper(), key=m.key(), partition=m.partition())
            positions = consumer.position(consumer.assignment())
            group = consumer.consumer_group_metadata()
            retrying(lambda: producer.send_offsets_to_transaction(positions, group, 60))
            retrying(lambda: producer.commit_transaction(60))
            moved += len(batch)
            print(f"eos: committed {moved}", flush=True)
        except ck.KafkaException as e:
            error = e.args[0]
            if error.fatal() or not error.txn_requires_abort():
                print(f"eos: fatal {error}", file=sys.stderr)
                sys.exit(3)
            print(f"eos: aborting after {error}", file=sys.stderr)
            retrying(lambda: producer.abort_transaction(60))
            rewind(consumer, partitions)
    print(f"eos: done {moved}")


main()
