// Kafka produce throughput of the Apache Java client (kafka-clients), one
// producer: idempotent, or transactional with a commit every `per-txn`
// records, the same batch size and linger in both. Run by
// perf-scripts/txn-vs-idempotent.sh and perf-scripts/java-producer.sh:
//   java -cp JARS:CLASSES TxnThroughput HOST:PORT TOPIC MODE RECORDS PER_TXN [BATCH_BYTES]
// where MODE is idempotent or transactional, BATCH_BYTES the batch.size
// (default 262144; the client's own default is 16384). Prints one line:
//   MODE records=N seconds=S records_per_s=R cpu_s=C
// where C is the CPU time the whole JVM used (every thread: the caller's,
// the client's sender, the JIT and the collector).
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnThroughput {
    public static void main(String[] args) throws Exception {
        String boot = args[0], topic = args[1], mode = args[2];
        int records = Integer.parseInt(args[3]), perTxn = Integer.parseInt(args[4]);
        int batchBytes = args.length > 5 ? Integer.parseInt(args[5]) : 262144;
        boolean transactional = mode.equals("transactional");
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.BATCH_SIZE_CONFIG, batchBytes);
        config.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        if (transactional) {
            config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "throughput-" + System.nanoTime());
        }
        byte[] value = new byte[1024];
        new Random(7).nextBytes(value);
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(config)) {
            if (transactional) {
                p.initTransactions();
            }
            long start = System.nanoTime();
            for (int i = 0; i < records; i++) {
                if (transactional && i % perTxn == 0) {
                    if (i > 0) {
                        p.commitTransaction();
                    }
                    p.beginTransaction();
                }
                p.send(new ProducerRecord<>(topic, value));
            }
            if (transactional) {
                p.commitTransaction();
            } else {
                p.flush();
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            double cpu = ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
                    .getOperatingSystemMXBean()).getProcessCpuTime() / 1e9;
            System.out.printf("%s records=%d seconds=%.3f records_per_s=%.0f cpu_s=%.3f%n", mode, records, seconds,
                    records / seconds, cpu);
        }
    }
}
