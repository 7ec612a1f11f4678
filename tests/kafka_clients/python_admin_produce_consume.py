"""kafka-python against ringmq's Kafka listener: create a topic (twice: the
second is refused), produce 30 keyed messages with acks=all, read them back
without a group, delete the topic. Usage: python3 THIS HOST:PORT"""
import sys
from kafka.admin import KafkaAdminClient, NewTopic
from kafka import KafkaProducer, KafkaConsumer
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], api_version=(2, 0))
a.create_topics([NewTopic("py", 3, 1)])
try:
    a.create_topics([NewTopic("py", 3, 1)])
except Exception as e:
    print("second create:", type(e).__name__)
p = KafkaProducer(bootstrap_servers=sys.argv[1], api_version=(2, 0), acks="all")
for i in range(30):
    p.send("py", key=b"k%d" % i, value=b"v%d" % i)
p.flush()
c = KafkaConsumer("py", bootstrap_servers=sys.argv[1], api_version=(2, 0), auto_offset_reset="earliest", consumer_timeout_ms=3000, group_id=None)
got = [(m.partition, m.offset, m.key, m.value) for m in c]
assert len(got) == 30, got
assert all(k[1:] == v[1:] for _, _, k, v in got)
print("consumed", len(got))
a.delete_topics(["py"])
print("deleted")
