// A Java DefaultMQProducer for the body tests: the real Apache RocketMQ client sending what its users send, step by
// step, and printing each message it sent as "SENT <json>" (its UNIQ_KEY, the SHA-256 and size of its body, and the
// step's compression and way of sending), then "DONE <json>" with the count. Each step is one --send argument:
//   mode=single|batch|auto,compress=ZLIB|LZ4|ZSTD,count=N,size=BYTES[,over=BYTES][,tag=T][,queue=Q]
// single: send(Message) each; batch: send(Collection) of all N at once (a MessageBatch, never compressed), to queue Q
// when given (else the one the producer picks: each step's producer starts its round of queues anywhere); auto: a
// producer with setAutoBatch(true), each message sent asynchronously and collected into batches by its
// ProduceAccumulator. compress is the producer's setCompressType, over its setCompressMsgBodyOverHowmuch (4096 by
// default). Bodies are compressible text (JSON-like lines), different for every message. Run with the fetched jars:
//   java -cp "lib/*" Producer.java --namesrv 127.0.0.1:9876 --topic T --send mode=single,compress=LZ4,count=10,size=8192
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.*;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.message.*;

public class Producer {
    static int sequence = 0;

    static synchronized void emit(String kind, String json) {
        System.out.println(kind + " " + json);
        System.out.flush();
    }

    static byte[] body(int size) {
        int n = sequence++;
        StringBuilder text = new StringBuilder();
        for (int line = 0; text.length() < size; line++) {
            text.append("{\"message\":").append(n).append(",\"line\":").append(line).append(",\"customer\":\"c")
                .append((n * 7919 + line * 104729) % 100000).append("\",\"amount\":").append((n + line) % 500)
                .append(".").append(line % 100).append(",\"state\":\"").append(line % 3 == 0 ? "PAID" : "NEW")
                .append("\"}\n");
        }
        return text.substring(0, size).getBytes(StandardCharsets.UTF_8);
    }

    static String sha256(byte[] body) throws Exception {
        StringBuilder hex = new StringBuilder();
        for (byte b : MessageDigest.getInstance("SHA-256").digest(body)) hex.append(String.format("%02x", b));
        return hex.toString();
    }

    static MessageQueue queue(DefaultMQProducer producer, String topic, int id) throws Exception {
        for (MessageQueue mq : producer.fetchPublishMessageQueues(topic)) {
            if (mq.getQueueId() == id) return mq;
        }
        throw new IllegalArgumentException("topic " + topic + " has no queue " + id);
    }

    static DefaultMQProducer start(String namesrv, String group, Map<String, String> step) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setClientIP("127.0.0.1");
        producer.setInstanceName(group);
        producer.setCompressType(CompressionType.of(step.getOrDefault("compress", "ZLIB")));
        producer.setCompressMsgBodyOverHowmuch(Integer.parseInt(step.getOrDefault("over", "4096")));
        producer.setAutoBatch("auto".equals(step.get("mode")));
        producer.start();
        return producer;
    }

    public static void main(String[] args) throws Exception {
        String namesrv = null, topic = null;
        List<Map<String, String>> steps = new ArrayList<>();
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--namesrv": namesrv = args[i + 1]; break;
                case "--topic": topic = args[i + 1]; break;
                case "--send":
                    Map<String, String> step = new LinkedHashMap<>();
                    for (String pair : args[i + 1].split(",")) step.put(pair.split("=")[0], pair.split("=")[1]);
                    steps.add(step);
                    break;
                default: throw new IllegalArgumentException("unexpected argument " + args[i]);
            }
        }
        int sent = 0;
        for (int index = 0; index < steps.size(); index++) {
            Map<String, String> step = steps.get(index);
            DefaultMQProducer producer = start(namesrv, "rr-body-producer-" + index, step);
            try {
                List<Message> messages = new ArrayList<>();
                int count = Integer.parseInt(step.get("count")), size = Integer.parseInt(step.get("size"));
                for (int i = 0; i < count; i++) messages.add(new Message(topic, step.getOrDefault("tag", "TagA"), body(size)));
                List<byte[]> bodies = new ArrayList<>();
                for (Message m : messages) bodies.add(m.getBody().clone());  // send() compresses a body in place
                String mode = step.get("mode");
                if ("batch".equals(mode) && step.containsKey("queue")) {
                    producer.send(messages, queue(producer, topic, Integer.parseInt(step.get("queue"))));
                } else if ("batch".equals(mode)) {
                    producer.send(messages);
                } else if ("auto".equals(mode)) {
                    CountDownLatch done = new CountDownLatch(count);
                    AtomicReference<Throwable> failed = new AtomicReference<>();
                    for (Message m : messages) {
                        producer.send(m, new SendCallback() {
                            public void onSuccess(SendResult result) { done.countDown(); }
                            public void onException(Throwable e) { failed.set(e); done.countDown(); }
                        });
                    }
                    done.await();
                    if (failed.get() != null) throw new RuntimeException(failed.get());
                } else {
                    for (Message m : messages) {
                        SendResult result = producer.send(m);
                        if (result.getSendStatus() != SendStatus.SEND_OK) throw new IllegalStateException(result.toString());
                    }
                }
                for (int i = 0; i < count; i++) {
                    emit("SENT", "{\"msgId\":\"" + MessageClientIDSetter.getUniqID(messages.get(i)) + "\",\"sha256\":\""
                        + sha256(bodies.get(i)) + "\",\"size\":" + bodies.get(i).length + ",\"mode\":\"" + mode
                        + "\",\"compress\":\"" + step.getOrDefault("compress", "ZLIB") + "\",\"over\":"
                        + step.getOrDefault("over", "4096") + "}");
                    sent++;
                }
            } finally {
                producer.shutdown();
            }
        }
        emit("DONE", "{\"sent\":" + sent + "}");
    }
}
