// Apache Kafka Connect 4.3 (connect-runtime, unmodified) in distributed mode
// against ringmq's Kafka listener. Run by tests/kafka_connect.rs:
//   java -cp JARS ConnectWorker HOST:PORT WORK_DIR
// A worker is built as ConnectDistributed builds one (its DistributedHerder,
// Worker and the Kafka-backed config, offset and status stores, which need
// compacted topics) without the REST server: Connect 4.3's needs Jetty 12's
// security module, which no package reachable here ships; the herder is
// given connectors directly instead of over HTTP. The run:
//   1. a FileStream source connector reads WORK_DIR/in.txt into topic
//      "lines" and a FileStream sink connector writes "lines" to
//      WORK_DIR/out.txt; out.txt ends up holding in.txt's 100 lines
//   2. Connect's internal topics exist with cleanup.policy=compact
//      (Connect creates them so and checks them with DescribeConfigs)
//   3. the worker stops, in.txt gains 50 lines, a new worker starts: it reads
//      both connectors back from the config topic and their positions from
//      the offset topic and consumer group, and out.txt ends up holding all
//      150 lines, each once, in order
// It prints what it checked; a failed check exits non-zero.

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.runtime.Worker;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;
import org.apache.kafka.connect.runtime.isolation.Plugins;
import org.apache.kafka.connect.runtime.rest.RestClient;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo;
import org.apache.kafka.connect.storage.KafkaConfigBackingStore;
import org.apache.kafka.connect.storage.KafkaOffsetBackingStore;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.apache.kafka.connect.util.ConnectUtils;
import org.apache.kafka.connect.util.FutureCallback;
import org.apache.kafka.connect.util.SharedTopicAdmin;

public class ConnectWorker {
    static String boot;
    static Path dir;
    static final List<String> INTERNAL = List.of("connect-configs", "connect-offsets", "connect-status");

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("check failed: " + what);
            System.exit(1);
        }
    }

    static Map<String, String> workerProps(int n) throws Exception {
        Map<String, String> p = new HashMap<>();
        p.put("bootstrap.servers", boot);
        p.put("group.id", "connect-cluster");
        p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("config.storage.topic", INTERNAL.get(0));
        p.put("offset.storage.topic", INTERNAL.get(1));
        p.put("status.storage.topic", INTERNAL.get(2));
        p.put("config.storage.replication.factor", "1");
        p.put("offset.storage.replication.factor", "1");
        p.put("status.storage.replication.factor", "1");
        p.put("offset.storage.partitions", "5");
        p.put("offset.flush.interval.ms", "500");
        Path plugins = Files.createDirectories(dir.resolve("plugins"));
        p.put("plugin.path", plugins.toString());
        p.put("client.id", "worker-" + n);
        return p;
    }

    /** A distributed worker, as ConnectDistributed.createHerder builds it; started. */
    static DistributedHerder startWorker(int n) throws Exception {
        Map<String, String> props = workerProps(n);
        Plugins plugins = new Plugins(props);
        DistributedConfig config = new DistributedConfig(props);
        String workerId = "127.0.0.1:" + (18000 + n);
        ConnectorClientConfigOverridePolicy policy = plugins.newPlugin(
                config.getString(WorkerConfig.CONNECTOR_CLIENT_POLICY_CLASS_CONFIG), config,
                ConnectorClientConfigOverridePolicy.class);
        String clusterId = config.kafkaClusterId();
        String clientIdBase = ConnectUtils.clientIdBase(config);
        Map<String, Object> adminProps = new HashMap<>(config.originals());
        ConnectUtils.addMetricsContextProperties(adminProps, config, clusterId);
        adminProps.put(AdminClientConfig.CLIENT_ID_CONFIG, clientIdBase + "shared-admin");
        SharedTopicAdmin admin = new SharedTopicAdmin(adminProps);
        KafkaOffsetBackingStore offsets = new KafkaOffsetBackingStore(admin, () -> clientIdBase,
                plugins.newInternalConverter(true, "org.apache.kafka.connect.json.JsonConverter",
                        Map.of("schemas.enable", "false")));
        offsets.configure(config);
        Worker worker = new Worker(workerId, Time.SYSTEM, plugins, config, offsets, policy);
        KafkaStatusBackingStore status =
                new KafkaStatusBackingStore(Time.SYSTEM, worker.getInternalValueConverter(), admin, clientIdBase);
        status.configure(config);
        KafkaConfigBackingStore configs = new KafkaConfigBackingStore(worker.getInternalValueConverter(), config,
                worker.configTransformer(), admin, clientIdBase);
        DistributedHerder herder = new DistributedHerder(config, Time.SYSTEM, worker, clusterId, status, configs,
                "http://" + workerId + "/", new RestClient(config), policy, List.of(), admin);
        herder.start();
        return herder;
    }

    /** Gives the herder a connector, retrying while the worker has not joined its group yet. */
    static void putConnector(DistributedHerder herder, String name, Map<String, String> given) throws Exception {
        // The REST layer adds the name to a connector's config; here it is added as it would.
        Map<String, String> config = new HashMap<>(given);
        config.put("name", name);
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            FutureCallback<org.apache.kafka.connect.runtime.Herder.Created<ConnectorInfo>> done = new FutureCallback<>();
            herder.putConnectorConfig(name, config, true, done);
            try {
                done.get(30, TimeUnit.SECONDS);
                return;
            } catch (Exception e) {
                check(System.currentTimeMillis() < deadline, "connector " + name + " not taken: " + e);
                Thread.sleep(500);
            }
        }
    }

    /** Waits until out.txt holds exactly in.txt's lines. */
    static List<String> waitForCopy(String what) throws Exception {
        List<String> in = Files.readAllLines(dir.resolve("in.txt"));
        long deadline = System.currentTimeMillis() + 90_000;
        List<String> out = List.of();
        while (System.currentTimeMillis() < deadline) {
            Path file = dir.resolve("out.txt");
            out = Files.exists(file) ? Files.readAllLines(file) : List.of();
            if (out.size() >= in.size()) {
                break;
            }
            Thread.sleep(200);
        }
        check(out.equals(in), what + ": out.txt holds in.txt's " + in.size() + " lines, each once, in order; it has "
                + out.size() + (out.size() > 0 ? ", first " + out.get(0) + ", last " + out.get(out.size() - 1) : ""));
        return out;
    }

    static void appendLines(int from, int to) throws Exception {
        List<String> lines = new ArrayList<>();
        for (int i = from; i < to; i++) {
            lines.add("line-" + i);
        }
        Files.write(dir.resolve("in.txt"), lines, java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.APPEND);
    }

    public static void main(String[] args) throws Exception {
        boot = args[0];
        dir = Path.of(args[1]);
        appendLines(0, 100);
        DistributedHerder first = startWorker(1);
        putConnector(first, "file-source", Map.of("connector.class",
                "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max", "1", "file",
                dir.resolve("in.txt").toString(), "topic", "lines"));
        putConnector(first, "file-sink", Map.of("connector.class",
                "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max", "1", "file",
                dir.resolve("out.txt").toString(), "topics", "lines"));
        waitForCopy("the first worker");
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, boot))) {
            for (String topic : INTERNAL) {
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
                check("compact".equals(c.get("cleanup.policy").value()), topic + " is compacted: " + c);
            }
        }
        first.stop();
        appendLines(100, 150);
        DistributedHerder second = startWorker(2);
        waitForCopy("a new worker");
        second.stop();
        System.out.println("connect: a distributed worker copied 100 lines through ringmq, its internal topics compacted;"
                + " a new worker resumed both connectors from them and copied the next 50, each once");
        System.exit(0);
    }
}
