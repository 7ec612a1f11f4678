// The Apache Kafka Java client (kafka-clients, unmodified) against ringmq's
// Kafka listener. Run by tests/kafka_java.rs with Java's source launcher:
//   java -cp JARS tests/kafka_clients/JavaClients.java HOST:PORT PHASE
// where PHASE is one of
//   exact   records of every shape (null and empty keys and values, repeated
//           headers, null header values, timestamps) in each compression,
//           produced and read back field by field; an offset commit's
//           metadata read back
//   admin   the AdminClient: topics created with configs, configs altered
//           incrementally and described with their source, the broker
//           enforcing them (max.message.bytes, retention.ms), records
//           deleted, groups listed, described, their offsets and the groups
//           deleted, partitions added, log dirs described, leaders elected
//   cooperative  two members with the CooperativeStickyAssignor split two
//           partitions 1+1 (incremental rebalances), one leaves, the other
//           takes both over from the committed offsets; every record read once
//   consumer_protocol  the same with group.protocol=consumer (KIP-848)
//   static_regex  KIP-848 members subscribed by a broker-side regex
//           (SubscriptionPattern) with static instance ids split two matching
//           topics 1+1; one restarts and gets its partition back while the
//           other never holds it; a new matching topic is assigned
//   transactions  a transactional producer: initTransactions, sends,
//           sendOffsetsToTransaction, commits and aborts; a read_committed
//           consumer reads exactly the committed records in order (a
//           read_uncommitted one the aborted too), the group's offset is the
//           one the transaction committed; a second producer with the same
//           transactional.id fences the first; a transaction left open past
//           its timeout is aborted by the broker; the admin's transaction
//           and producer listings
//   eos     (args: IN OUT GROUP TRANSACTIONAL_ID IDLE_SECONDS) the
//           consume-transform-produce loop of tests/common/eos.rs: read IN
//           (read_committed, from the group's committed offsets), write each
//           value upper-cased to the same partition of OUT and commit IN's
//           offsets in the same transaction, until IN is idle; prints
//           "eos: committed N" after each transaction
//   cluster the AdminClient's describeCluster (DescribeCluster): prints
//           "cluster ID with N brokers, controller C" and each broker
//   security  (args: an admin user and password; the broker requires logins)
//           SCRAM users made and deleted from salted passwords, ACLs created,
//           described, enforced and deleted, the authorized operations a
//           rule gives on a topic and on the cluster, client quotas set,
//           described and removed
// Each phase prints what it checked; a failed check exits non-zero.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class JavaClients {
    static String boot;
    /** SASL/SCRAM-SHA-256 settings of the user every client logs in as (none: no login). */
    static Map<String, Object> login = Map.of();

    public static void main(String[] args) throws Exception {
        boot = args[0];
        if (args[1].equals("security") && args.length > 3) {
            login = loginAs(args[2], args[3]);
        }
        switch (args[1]) {
            case "exact" -> exact();
            case "admin" -> adminApis();
            case "security" -> security();
            case "cluster" -> cluster();
            case "cooperative" -> group(Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    CooperativeStickyAssignor.class.getName()), "cooperative");
            case "classic" -> group(Map.of(), "classic");
            case "consumer_protocol" -> group(Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer"), "consumer_protocol");
            case "static_regex" -> staticRegex();
            case "transactions" -> transactions();
            case "eos" -> eosLoop(args[2], args[3], args[4], args[5], Double.parseDouble(args[6]));
            case "reassign" -> reassign(args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            default -> throw new IllegalArgumentException("unknown phase " + args[1]);
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static byte[] b(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static Map<String, Object> loginAs(String user, String password) {
        return Map.of("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "SCRAM-SHA-256", "sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + user
                        + "\" password=\"" + password + "\";");
    }

    static Admin admin() {
        Map<String, Object> config = new HashMap<>(login);
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        return Admin.create(config);
    }

    static KafkaProducer<byte[], byte[]> producer(Map<String, Object> extra) {
        Map<String, Object> config = new HashMap<>(login);
        config.putAll(extra);
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        return new KafkaProducer<>(config);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String group) {
        return consumer(group, Map.of());
    }

    static KafkaConsumer<byte[], byte[]> consumer(String group, Map<String, Object> extra) {
        Map<String, Object> config = new HashMap<>(login);
        config.putAll(extra);
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        return new KafkaConsumer<>(config);
    }

    static void createTopic(Admin admin, String name, int partitions, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs))).all().get();
    }

    /** Reads `n` records of partition 0 from its start. */
    static List<ConsumerRecord<byte[], byte[]>> readAll(String topic, int n) {
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer("read-" + topic)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(500)).forEach(got::add);
            }
        }
        return got;
    }

    record Shape(String key, String value, List<Header> headers, long timestamp) {}

    static final long BASE_TS = 1_700_000_000_000L;

    static List<Shape> shapes() {
        List<Header> repeated = List.of(new RecordHeader("a", b("1")), new RecordHeader("a", b("2")),
                new RecordHeader("b", null), new RecordHeader("a", b("")));
        return List.of(
                new Shape(null, null, List.of(), BASE_TS),
                new Shape("", "", List.of(), BASE_TS + 5),
                new Shape("k", null, repeated, BASE_TS - 1_000),
                new Shape(null, "v", List.of(new RecordHeader("only-null", null)), BASE_TS + 60_000),
                new Shape("key", "x".repeat(3000), repeated, BASE_TS + 1));
    }

    static void exact() throws Exception {
        try (Admin admin = admin()) {
            for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
                String topic = "java-exact-" + codec;
                createTopic(admin, topic, 1, Map.of());
                try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                        ProducerConfig.LINGER_MS_CONFIG, 50))) {
                    for (Shape s : shapes()) {
                        p.send(new ProducerRecord<>(topic, 0, s.timestamp, b(s.key), b(s.value), s.headers));
                    }
                    p.flush();
                }
                List<ConsumerRecord<byte[], byte[]>> got = readAll(topic, shapes().size());
                check(got.size() == shapes().size(), codec + ": read " + got.size());
                for (int i = 0; i < got.size(); i++) {
                    Shape s = shapes().get(i);
                    ConsumerRecord<byte[], byte[]> r = got.get(i);
                    String at = codec + " record " + i + ": ";
                    check(Arrays.equals(r.key(), b(s.key)), at + "key " + Arrays.toString(r.key()));
                    check(Arrays.equals(r.value(), b(s.value)), at + "value");
                    check(r.timestamp() == s.timestamp && r.timestampType() == TimestampType.CREATE_TIME, at + "timestamp " + r.timestamp());
                    Header[] headers = r.headers().toArray();
                    check(headers.length == s.headers.size(), at + "headers " + headers.length);
                    for (int h = 0; h < headers.length; h++) {
                        check(headers[h].key().equals(s.headers.get(h).key())
                                && Arrays.equals(headers[h].value(), s.headers.get(h).value()), at + "header " + h);
                    }
                }
                System.out.println("exact " + codec + ": " + got.size() + " shapes");
            }
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer("java-meta")) {
            TopicPartition tp = new TopicPartition("java-exact-none", 0);
            c.assign(List.of(tp));
            c.commitSync(Map.of(tp, new OffsetAndMetadata(3, "checkpoint-7")));
            OffsetAndMetadata back = c.committed(Set.of(tp)).get(tp);
            check(back.offset() == 3 && back.metadata().equals("checkpoint-7"), "committed " + back);
        }
        System.out.println("exact: commit metadata read back");
    }

    static Map<String, ConfigEntry> describe(Admin admin, String topic) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Map<String, ConfigEntry> out = new HashMap<>();
        admin.describeConfigs(List.of(r)).all().get().get(r).entries().forEach(e -> out.put(e.name(), e));
        return out;
    }

    static long[] watermarks(String topic, int partition) {
        try (KafkaConsumer<byte[], byte[]> c = consumer("wm")) {
            TopicPartition tp = new TopicPartition(topic, partition);
            return new long[] {c.beginningOffsets(List.of(tp)).get(tp), c.endOffsets(List.of(tp)).get(tp)};
        }
    }

    static void send(String topic, int partition, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, partition, b("k" + i), b("v" + partition + "-" + i))).get();
            }
        }
    }

    /** Moves a partition to broker {@code to} with AlterPartitionReassignments while records go in before
     * and after; lists it until done; reads them all back in order from the new leader. */
    static void reassign(String topic, int partition, int to) throws Exception {
        TopicPartition tp = new TopicPartition(topic, partition);
        long start = watermarks(topic, partition)[1];
        send(topic, partition, 50);
        try (Admin admin = admin()) {
            try {
                admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(to, to + 1)))))
                        .all().get();
                check(false, "two replicas were taken");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.InvalidReplicaAssignmentException,
                        "two replicas refused: " + e.getCause());
            }
            try {
                admin.alterPartitionReassignments(Map.of(tp, Optional.empty())).all().get();
                check(false, "a cancel of nothing was taken");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.NoReassignmentInProgressException,
                        "a cancel of nothing refused: " + e.getCause());
            }
            System.out.println("refused two replicas and a cancel of nothing");
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(to)))))
                    .all().get();
            long deadline = System.currentTimeMillis() + 120_000;
            while (!admin.listPartitionReassignments().reassignments().get().isEmpty()) {
                check(System.currentTimeMillis() < deadline, "the reassignment did not end within two minutes");
                Thread.sleep(100);
            }
            deadline = System.currentTimeMillis() + 60_000;
            int leader = -1;
            while (leader != to && System.currentTimeMillis() < deadline) {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                leader = d.partitions().get(partition).leader().id();
                Thread.sleep(100);
            }
            check(leader == to, "the partition's leader is broker " + to + ", not " + leader);
            System.out.println("reassigned to broker " + to);
        }
        send(topic, partition, 50);
        try (KafkaConsumer<byte[], byte[]> c = consumer("reassign-check")) {
            c.assign(List.of(tp));
            c.seek(tp, start);
            List<String> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < 100 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    check(r.offset() == start + got.size(), "offset " + r.offset() + " follows " + got.size());
                    got.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
            List<String> sent = new ArrayList<>();
            for (int round = 0; round < 2; round++) {
                for (int i = 0; i < 50; i++) {
                    sent.add("v" + partition + "-" + i);
                }
            }
            check(got.equals(sent), "read back " + got.size() + " records as sent");
        }
        System.out.println("100 records read back in order across the reassignment");
    }

    static void adminApis() throws Exception {
        try (Admin admin = admin()) {
            createTopic(admin, "jc", 1, Map.of("max.message.bytes", "2000", "segment.bytes", "1048576"));
            Map<String, ConfigEntry> entries = describe(admin, "jc");
            check(entries.get("max.message.bytes").value().equals("2000")
                    && entries.get("max.message.bytes").source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "created with its config: " + entries.get("max.message.bytes"));
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
                try {
                    p.send(new ProducerRecord<>("jc", 0, null, new byte[3000])).get();
                    check(false, "a record past max.message.bytes was stored");
                } catch (ExecutionException e) {
                    check(e.getCause() instanceof RecordTooLargeException, "refused as too large: " + e.getCause());
                }
            }
            check(watermarks("jc", 0)[1] == 0, "the refused record stored nothing");
            ConfigResource jc = new ConfigResource(ConfigResource.Type.TOPIC, "jc");
            admin.incrementalAlterConfigs(Map.of(jc, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE))))
                    .all().get();
            entries = describe(admin, "jc");
            check(entries.get("retention.ms").value().equals("1000"), "retention.ms " + entries.get("retention.ms"));
            check(entries.get("max.message.bytes").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "max.message.bytes back to its default: " + entries.get("max.message.bytes"));
            send("jc", 0, 3);
            long deadline = System.currentTimeMillis() + 60_000;
            while (watermarks("jc", 0)[0] < 3 && System.currentTimeMillis() < deadline) {
                Thread.sleep(200);
            }
            check(Arrays.equals(watermarks("jc", 0), new long[] {3, 3}), "retention.ms emptied the partition: "
                    + Arrays.toString(watermarks("jc", 0)));
            System.out.println("admin: configs created, altered, described and enforced");

            createTopic(admin, "jd", 2, Map.of());
            send("jd", 0, 10);
            send("jd", 1, 4);
            DeleteRecordsResult deleted = admin.deleteRecords(Map.of(new TopicPartition("jd", 0), RecordsToDelete.beforeOffset(6)));
            check(deleted.lowWatermarks().get(new TopicPartition("jd", 0)).get().lowWatermark() == 6, "low watermark 6");
            check(watermarks("jd", 0)[0] == 6, "partition 0 starts at 6");
            System.out.println("admin: records deleted below 6");

            try (KafkaConsumer<byte[], byte[]> live = consumer("jg-live")) {
                live.subscribe(List.of("jd"));
                deadline = System.currentTimeMillis() + 30_000;
                while (live.assignment().size() < 2 && System.currentTimeMillis() < deadline) {
                    live.poll(Duration.ofMillis(200));
                }
                check(live.assignment().size() == 2, "the live member holds both partitions");
                live.commitSync();
                try (KafkaConsumer<byte[], byte[]> idle = consumer("jg-idle")) {
                    TopicPartition p0 = new TopicPartition("jd", 0), p1 = new TopicPartition("jd", 1);
                    idle.assign(List.of(p0, p1));
                    idle.commitSync(Map.of(p0, new OffsetAndMetadata(7), p1, new OffsetAndMetadata(2)));
                }
                Set<String> listed = new HashSet<>();
                admin.listGroups().all().get().forEach(g -> listed.add(g.groupId()));
                check(listed.containsAll(Set.of("jg-live", "jg-idle")), "listed " + listed);
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of("jg-live")).all().get().get("jg-live");
                check(d.members().size() == 1 && d.members().iterator().next().assignment().topicPartitions().size() == 2,
                        "described " + d);
                admin.deleteConsumerGroupOffsets("jg-idle", Set.of(new TopicPartition("jd", 1))).all().get();
                Map<TopicPartition, OffsetAndMetadata> left =
                        admin.listConsumerGroupOffsets("jg-idle").partitionsToOffsetAndMetadata().get();
                check(left.keySet().equals(Set.of(new TopicPartition("jd", 0))) && left.values().iterator().next().offset() == 7,
                        "the idle group's offset of partition 1 deleted: " + left);
                try {
                    admin.deleteConsumerGroups(List.of("jg-live")).all().get();
                    check(false, "a group with members was deleted");
                } catch (ExecutionException e) {
                    check(e.getCause() instanceof org.apache.kafka.common.errors.GroupNotEmptyException, "not empty: " + e.getCause());
                }
                admin.deleteConsumerGroups(List.of("jg-idle")).all().get();
                check(admin.listConsumerGroupOffsets("jg-idle").partitionsToOffsetAndMetadata().get().isEmpty(),
                        "the deleted group has no offsets");
            }
            System.out.println("admin: groups listed, described, offsets and an empty group deleted");

            createTopic(admin, "jp", 1, Map.of());
            admin.createPartitions(Map.of("jp", NewPartitions.increaseTo(3))).all().get();
            check(admin.describeTopics(List.of("jp")).allTopicNames().get().get("jp").partitions().size() == 3, "3 partitions");
            try {
                admin.createPartitions(Map.of("jp", NewPartitions.increaseTo(2))).all().get();
                check(false, "fewer partitions taken");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.InvalidPartitionsException, "fewer: " + e.getCause());
            }
            send("jp", 2, 5);
            check(watermarks("jp", 2)[1] == 5, "the new partition takes records");
            long size = 0;
            for (Node node : admin.describeCluster().nodes().get()) {
                for (var dir : admin.describeLogDirs(List.of(node.id())).allDescriptions().get().get(node.id()).values()) {
                    check(dir.totalBytes().orElse(0) > 0, "the disk's size");
                    var replica = dir.replicaInfos().get(new TopicPartition("jp", 2));
                    if (replica != null) {
                        size += replica.size();
                    }
                }
            }
            check(size > 5 * 2, "partition 2's size is described: " + size);
            var elected = admin.electLeaders(ElectionType.PREFERRED, Set.of(new TopicPartition("jp", 0))).partitions().get();
            var outcome = elected.get(new TopicPartition("jp", 0));
            check(outcome.isPresent() && outcome.get() instanceof org.apache.kafka.common.errors.ElectionNotNeededException,
                    "no election needed: " + outcome);
            var everywhere = admin.electLeaders(ElectionType.PREFERRED, null).partitions().get();
            check(everywhere.isEmpty(), "asked for every partition, none listed as not needed: " + everywhere);
            System.out.println("admin: partitions added, log dirs described (" + size + " bytes), no election needed");
        }
    }

    static void cluster() throws Exception {
        try (Admin admin = admin()) {
            DescribeClusterResult described = admin.describeCluster();
            String id = described.clusterId().get();
            Collection<Node> nodes = described.nodes().get();
            Node controller = described.controller().get();
            check(id != null && !nodes.isEmpty() && nodes.contains(controller), id + " " + nodes + " " + controller);
            System.out.println("cluster " + id + " with " + nodes.size() + " brokers, controller " + controller.id());
            for (Node node : nodes) {
                System.out.println("broker " + node.id() + " at " + node.host() + ":" + node.port());
            }
        }
    }

    /** The operations `login` may do to the cluster, and to `topic`. */
    static Set<org.apache.kafka.common.acl.AclOperation>[] authorized(String topic) throws Exception {
        try (Admin admin = admin()) {
            var onCluster = admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true))
                    .authorizedOperations().get();
            var onTopic = admin.describeTopics(List.of(topic), new DescribeTopicsOptions().includeAuthorizedOperations(true))
                    .allTopicNames().get().get(topic).authorizedOperations();
            @SuppressWarnings("unchecked")
            Set<org.apache.kafka.common.acl.AclOperation>[] both = new Set[] {onCluster, onTopic};
            return both;
        }
    }

    static void security() throws Exception {
        try (Admin admin = admin()) {
            var carol = new UserScramCredentialUpsertion("carol", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "carol-pw");
            admin.alterUserScramCredentials(List.of(carol)).all().get();
            var described = admin.describeUserScramCredentials(List.of("carol")).all().get().get("carol");
            check(described.credentialInfos().size() == 1 && described.credentialInfos().get(0).iterations() == 8192
                    && described.credentialInfos().get(0).mechanism() == ScramMechanism.SCRAM_SHA_256, "carol: " + described);

            createTopic(admin, "car.x", 1, Map.of());
            createTopic(admin, "other", 1, Map.of());
            var prefixed = new org.apache.kafka.common.resource.ResourcePattern(
                    org.apache.kafka.common.resource.ResourceType.TOPIC, "car.", org.apache.kafka.common.resource.PatternType.PREFIXED);
            var write = new org.apache.kafka.common.acl.AclBinding(prefixed, new org.apache.kafka.common.acl.AccessControlEntry(
                    "User:carol", "*", org.apache.kafka.common.acl.AclOperation.WRITE, org.apache.kafka.common.acl.AclPermissionType.ALLOW));
            admin.createAcls(List.of(write)).all().get();
            var oneHost = new org.apache.kafka.common.acl.AclBinding(prefixed, new org.apache.kafka.common.acl.AccessControlEntry(
                    "User:carol", "10.0.0.1", org.apache.kafka.common.acl.AclOperation.READ, org.apache.kafka.common.acl.AclPermissionType.ALLOW));
            try {
                admin.createAcls(List.of(oneHost)).all().get();
                check(false, "a rule for one host was taken");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.InvalidRequestException, "one host: " + e.getCause());
            }
            var all = admin.describeAcls(org.apache.kafka.common.acl.AclBindingFilter.ANY).values().get();
            check(all.contains(write) && all.size() == 1, "described " + all);

            var super_ = authorized("car.x");
            check(super_[0].containsAll(List.of(org.apache.kafka.common.acl.AclOperation.ALTER,
                    org.apache.kafka.common.acl.AclOperation.DESCRIBE, org.apache.kafka.common.acl.AclOperation.CREATE,
                    org.apache.kafka.common.acl.AclOperation.CLUSTER_ACTION)), "a super user's on the cluster: " + super_[0]);
            var groupOps = admin.describeConsumerGroups(List.of("any-group"),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all().get()
                    .get("any-group").authorizedOperations();
            check(groupOps.equals(Set.of(org.apache.kafka.common.acl.AclOperation.READ,
                    org.apache.kafka.common.acl.AclOperation.DESCRIBE, org.apache.kafka.common.acl.AclOperation.DELETE)),
                    "a super user's on a group: " + groupOps);
            Map<String, Object> saved = login;
            login = loginAs("carol", "carol-pw");
            var carols = authorized("car.x");
            check(carols[0].isEmpty(), "carol's on the cluster: " + carols[0]);
            check(carols[1].equals(Set.of(org.apache.kafka.common.acl.AclOperation.WRITE,
                    org.apache.kafka.common.acl.AclOperation.DESCRIBE)), "carol's on car.x: " + carols[1]);
            System.out.println("security: authorized operations as the rules give them");
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10000))) {
                p.send(new ProducerRecord<>("car.x", 0, null, b("allowed"))).get();
                try {
                    p.send(new ProducerRecord<>("other", 0, null, b("refused"))).get();
                    check(false, "carol wrote to a topic no rule allows");
                } catch (ExecutionException e) {
                    check(e.getCause() instanceof org.apache.kafka.common.errors.TopicAuthorizationException, "refused: " + e.getCause());
                }
            }
            login = saved;
            var deleted = admin.deleteAcls(List.of(write.toFilter())).all().get();
            check(deleted.size() == 1 && deleted.contains(write), "deleted " + deleted);
            check(admin.describeAcls(org.apache.kafka.common.acl.AclBindingFilter.ANY).values().get().isEmpty(), "no rules left");
            System.out.println("security: a SCRAM user made from a salted password logged in; ACLs created, enforced, deleted");

            var entity = new org.apache.kafka.common.quota.ClientQuotaEntity(Map.of("user", "carol"));
            admin.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity,
                    List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0))))).all().get();
            var filter = org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(
                    List.of(org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity("user", "carol")));
            var quotas = admin.describeClientQuotas(filter).entities().get();
            check(quotas.get(entity) != null && quotas.get(entity).get("producer_byte_rate") == 1048576.0, "quotas " + quotas);
            try {
                admin.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity,
                        List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("request_percentage", 50.0))))).all().get();
                check(false, "request_percentage taken");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.InvalidRequestException, "request_percentage: " + e.getCause());
            }
            admin.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity,
                    List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
            check(admin.describeClientQuotas(filter).entities().get().isEmpty(), "the quota removed");
            System.out.println("security: a client quota set, described and removed");

            admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256))).all().get();
            try {
                admin.describeUserScramCredentials(List.of("carol")).description("carol").get();
                check(false, "a deleted user described");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.ResourceNotFoundException, "deleted: " + e.getCause());
            }
            System.out.println("security: the user deleted");
        }
    }

    /** Polls every member until `done`, or fails after 60 s. */
    static void pollUntil(String what, List<KafkaConsumer<byte[], byte[]>> members, Map<String, Integer> seen,
            java.util.function.BooleanSupplier done) {
        long deadline = System.currentTimeMillis() + 60_000;
        while (!done.getAsBoolean()) {
            check(System.currentTimeMillis() < deadline, "timed out: " + what + "; read " + seen.size() + ", assigned "
                    + members.stream().map(m -> m.assignment().toString()).toList());
            for (KafkaConsumer<byte[], byte[]> m : members) {
                for (ConsumerRecord<byte[], byte[]> r : m.poll(Duration.ofMillis(100))) {
                    seen.merge(new String(r.value(), StandardCharsets.UTF_8), 1, Integer::sum);
                }
                try {
                    m.commitSync();
                } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
                    // The member is mid-rebalance: the next poll completes it, then it commits.
                }
            }
        }
    }

    static void group(Map<String, Object> protocol, String name) throws Exception {
        String topic = "jg-" + name.replace('_', '-');
        try (Admin admin = admin()) {
            createTopic(admin, topic, 2, Map.of());
        }
        send(topic, 0, 50);
        send(topic, 1, 50);
        Map<String, Integer> seen = new HashMap<>();
        KafkaConsumer<byte[], byte[]> a = consumer(topic, protocol), b = consumer(topic, protocol);
        a.subscribe(List.of(topic));
        b.subscribe(List.of(topic));
        pollUntil("a 1+1 split", List.of(a, b), seen, () -> a.assignment().size() == 1 && b.assignment().size() == 1);
        pollUntil("the first records read", List.of(a, b), seen, () -> seen.size() == 100);
        try (Admin admin = admin()) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(topic)).all().get().get(topic);
            check(d.members().size() == 2 && d.members().stream().allMatch(m -> m.assignment().topicPartitions().size() == 1),
                    "described with two members of one partition each: " + d);
        }
        a.close();
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < 40; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, null, b("late" + i))).get();
            }
        }
        pollUntil("b takes both partitions over", List.of(b), seen, () -> b.assignment().size() == 2 && seen.size() == 140);
        b.close();
        check(seen.values().stream().allMatch(n -> n == 1), "every record read once: " + seen);
        System.out.println(name + ": split 1+1, took over on leave, 140 read once");
    }

    static KafkaConsumer<byte[], byte[]> staticMember(String group, String instance) {
        KafkaConsumer<byte[], byte[]> c = consumer(group, Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer",
                ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance));
        c.subscribe(new SubscriptionPattern("jr-.*"));
        return c;
    }

    /** `n` records to partition 0 of `topic`, each value naming its topic. */
    static void sendNamed(String topic, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, b(topic + "-" + i))).get();
            }
        }
    }

    static void staticRegex() throws Exception {
        String group = "jg-static-regex";
        try (Admin admin = admin()) {
            for (String t : List.of("jr-eu", "jr-us", "jx-eu")) {
                createTopic(admin, t, 1, Map.of());
            }
        }
        for (String t : List.of("jr-eu", "jr-us", "jx-eu")) {
            sendNamed(t, 10);
        }
        Map<String, Integer> seen = new HashMap<>();
        KafkaConsumer<byte[], byte[]> a = staticMember(group, "app-a"), b = staticMember(group, "app-b");
        pollUntil("a 1+1 split of the matching topics", List.of(a, b), seen,
                () -> a.assignment().size() == 1 && b.assignment().size() == 1 && seen.size() == 20);
        Set<TopicPartition> aHeld = new HashSet<>(a.assignment()), bHeld = new HashSet<>(b.assignment());
        Set<TopicPartition> both = new HashSet<>(aHeld);
        both.addAll(bHeld);
        check(both.equals(Set.of(new TopicPartition("jr-eu", 0), new TopicPartition("jr-us", 0))),
                "the regex matches whole names (jx-eu left out): " + both);
        try (Admin admin = admin()) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            Set<String> instances = new HashSet<>();
            d.members().forEach(m -> instances.add(m.groupInstanceId().orElse("none")));
            check(instances.equals(Set.of("app-a", "app-b")), "described with their instance ids: " + d);
        }
        a.close();
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>("jr-eu", 0, null, b("late-eu" + i))).get();
                p.send(new ProducerRecord<>("jr-us", 0, null, b("late-us" + i))).get();
            }
        }
        KafkaConsumer<byte[], byte[]> again = staticMember(group, "app-a");
        pollUntil("the restarted member reads what it held", List.of(again, b), seen, () -> seen.size() == 40);
        check(again.assignment().equals(aHeld), "the restarted member holds what it held: " + again.assignment());
        check(b.assignment().equals(bHeld), "the other member never took it: " + b.assignment());
        try (Admin admin = admin()) {
            createTopic(admin, "jr-asia", 1, Map.of());
        }
        sendNamed("jr-asia", 10);
        pollUntil("the new matching topic assigned and read", List.of(again, b), seen, () -> seen.size() == 50);
        again.close();
        b.close();
        check(seen.values().stream().allMatch(n -> n == 1), "every record read once: " + seen);
        System.out.println("static_regex: split 1+1 by regex, a restart kept its partition, a new topic joined, 50 read once");
    }

    static KafkaProducer<byte[], byte[]> transactional(String id, int timeoutMs) {
        return producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, timeoutMs));
    }

    /** Every value of the topic's partitions from their start, as `isolation` reads them, partition by partition. */
    static List<String> readValues(String topic, int partitions, String isolation, int expected) {
        List<String> got = new ArrayList<>();
        Map<String, Object> extra = Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        try (KafkaConsumer<byte[], byte[]> c = consumer("read-" + topic + "-" + isolation, extra)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<Integer, List<String>> byPartition = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 30_000;
            int n = 0;
            while (n < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) {
                    byPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(new String(r.value()));
                    n++;
                }
            }
            // A last poll: nothing more may come.
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(1000))) {
                byPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(new String(r.value()));
            }
            byPartition.values().forEach(got::addAll);
        }
        return got;
    }

    static List<String> named(String prefix, int from, int to, int partitions, int partition) {
        List<String> out = new ArrayList<>();
        for (int i = from; i < to; i++) {
            if (i % partitions == partition) {
                out.add(prefix + i);
            }
        }
        return out;
    }

    static void transactions() throws Exception {
        try (Admin admin = admin()) {
            createTopic(admin, "tx-in", 1, Map.of());
            createTopic(admin, "tx-out", 2, Map.of());
        }
        send("tx-in", 0, 20);
        try (KafkaProducer<byte[], byte[]> p = transactional("tx-java", 60_000)) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>("tx-out", i % 2, null, b("c" + i)));
            }
            p.sendOffsetsToTransaction(Map.of(new TopicPartition("tx-in", 0), new OffsetAndMetadata(10, "tx-meta")),
                    new ConsumerGroupMetadata("tx-group"));
            p.commitTransaction();
            p.beginTransaction();
            for (int i = 0; i < 6; i++) {
                p.send(new ProducerRecord<>("tx-out", i % 2, null, b("a" + i)));
            }
            p.sendOffsetsToTransaction(Map.of(new TopicPartition("tx-in", 0), new OffsetAndMetadata(16)),
                    new ConsumerGroupMetadata("tx-group"));
            p.flush();
            p.abortTransaction();
            p.beginTransaction();
            for (int i = 10; i < 16; i++) {
                p.send(new ProducerRecord<>("tx-out", i % 2, null, b("c" + i)));
            }
            p.commitTransaction();
        }
        List<String> committed = readValues("tx-out", 2, "read_committed", 16);
        List<String> expected = new ArrayList<>(named("c", 0, 16, 2, 0));
        expected.addAll(named("c", 0, 16, 2, 1));
        check(committed.equals(expected), "read_committed reads exactly the committed records in order: " + committed);
        List<String> everything = readValues("tx-out", 2, "read_uncommitted", 22);
        check(everything.size() == 22 && everything.containsAll(named("a", 0, 6, 1, 0)),
                "read_uncommitted reads the aborted records too, and no marker: " + everything);
        try (Admin admin = admin()) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets("tx-group").partitionsToOffsetAndMetadata().get();
            OffsetAndMetadata at = offsets.get(new TopicPartition("tx-in", 0));
            check(at != null && at.offset() == 10 && at.metadata().equals("tx-meta"),
                    "the committed transaction's offset is the group's, the aborted one's is not: " + offsets);
        }
        System.out.println("transactions: committed and aborted, read_committed read 16 of 22 in order, offsets committed");

        // A second producer with the same transactional.id fences the first.
        KafkaProducer<byte[], byte[]> zombie = transactional("tx-fence", 60_000);
        zombie.initTransactions();
        zombie.beginTransaction();
        zombie.send(new ProducerRecord<>("tx-out", 0, null, b("zombie-0"))).get();
        try (KafkaProducer<byte[], byte[]> p = transactional("tx-fence", 60_000)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>("tx-out", 1, null, b("fenced-by"))).get();
            boolean fenced = false;
            try {
                zombie.send(new ProducerRecord<>("tx-out", 1, null, b("zombie-1"))).get();
                zombie.commitTransaction();
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                fenced = true;
            } catch (ExecutionException e) {
                fenced = e.getCause() instanceof ProducerFencedException
                        || e.getCause() instanceof InvalidProducerEpochException;
            } catch (KafkaException e) {
                fenced = e.getCause() instanceof ProducerFencedException || e instanceof ProducerFencedException;
            }
            check(fenced, "the first producer is fenced");
            p.commitTransaction();
        }
        zombie.close(Duration.ZERO);
        List<String> afterFence = readValues("tx-out", 2, "read_committed", 17);
        check(afterFence.contains("fenced-by") && afterFence.stream().noneMatch(v -> v.startsWith("zombie")),
                "the fenced producer's records are aborted: " + afterFence);
        System.out.println("transactions: a second producer with the id fenced the first");

        // A transaction left open past its timeout is aborted by the broker.
        KafkaProducer<byte[], byte[]> slow = transactional("tx-timeout", 2_000);
        slow.initTransactions();
        slow.beginTransaction();
        slow.send(new ProducerRecord<>("tx-out", 0, null, b("timed-out"))).get();
        try (Admin admin = admin()) {
            long deadline = System.currentTimeMillis() + 30_000;
            TransactionState state = null;
            while (System.currentTimeMillis() < deadline) {
                state = admin.describeTransactions(List.of("tx-timeout")).all().get().get("tx-timeout").state();
                if (state == TransactionState.COMPLETE_ABORT) {
                    break;
                }
                Thread.sleep(200);
            }
            check(state == TransactionState.COMPLETE_ABORT, "the broker aborted the timed-out transaction: " + state);
            Collection<TransactionListing> listed = admin.listTransactions().all().get();
            check(listed.stream().anyMatch(t -> t.transactionalId().equals("tx-java")
                    && t.state() == TransactionState.COMPLETE_COMMIT), "listed: " + listed);
            var producers = admin.describeProducers(List.of(new TopicPartition("tx-out", 0))).all().get();
            check(!producers.get(new TopicPartition("tx-out", 0)).activeProducers().isEmpty(),
                    "the partition's producers described: " + producers);
        }
        boolean refused = false;
        try {
            slow.commitTransaction();
        } catch (KafkaException e) {
            refused = true;
        }
        check(refused, "the timed-out producer cannot commit");
        slow.close(Duration.ZERO);
        try (KafkaProducer<byte[], byte[]> p = transactional("tx-after", 60_000)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>("tx-out", 0, null, b("after-timeout")));
            p.commitTransaction();
        }
        List<String> afterTimeout = readValues("tx-out", 2, "read_committed", 18);
        check(afterTimeout.contains("after-timeout") && !afterTimeout.contains("timed-out"),
                "the timed-out records are aborted and later ones readable: " + afterTimeout);
        System.out.println("transactions: a transaction past its timeout was aborted by the broker");
    }

    static void eosLoop(String in, String out, String group, String txid, double idleSeconds) throws Exception {
        KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txid,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 10_000, ProducerConfig.LINGER_MS_CONFIG, 5));
        // First: fence an earlier run and abort its open transaction.
        p.initTransactions();
        KafkaConsumer<byte[], byte[]> c = consumer(group, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
        List<TopicPartition> tps = new ArrayList<>();
        c.partitionsFor(in).forEach(info -> tps.add(new TopicPartition(in, info.partition())));
        c.assign(tps);
        long moved = 0, idleSince = System.currentTimeMillis();
        while (System.currentTimeMillis() - idleSince < idleSeconds * 1000) {
            ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(500));
            if (records.isEmpty()) {
                continue;
            }
            idleSince = System.currentTimeMillis();
            p.beginTransaction();
            try {
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    byte[] upper = new String(r.value(), StandardCharsets.UTF_8).toUpperCase().getBytes(StandardCharsets.UTF_8);
                    p.send(new ProducerRecord<>(out, r.partition(), r.key(), upper));
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : tps) {
                    offsets.put(tp, new OffsetAndMetadata(c.position(tp)));
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p.commitTransaction();
                moved += records.count();
                System.out.println("eos: committed " + moved);
                System.out.flush();
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                System.err.println("eos: fenced " + e);
                System.exit(3);
            } catch (KafkaException e) {
                System.err.println("eos: aborting after " + e);
                p.abortTransaction();
                Map<TopicPartition, OffsetAndMetadata> committed = c.committed(new HashSet<>(tps));
                for (TopicPartition tp : tps) {
                    OffsetAndMetadata at = committed.get(tp);
                    c.seek(tp, at == null ? 0 : at.offset());
                }
            }
        }
        System.out.println("eos: done " + moved);
        p.close();
        c.close();
    }
}
