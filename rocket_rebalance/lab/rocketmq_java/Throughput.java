// The Java side of benchmarks/throughput.py: the real Apache RocketMQ client, as a user runs it with its defaults.
//   java -cp "lib/*" Throughput.java produce --namesrv ADDR --topic T --count N [--size 128]
//       preloads N messages of SIZE bytes, spread evenly over the topic's queues (batches of 256 per send)
//       and prints "PRODUCED {json}".
//   java -cp "lib/*" Throughput.java consume --namesrv ADDR --topic T --group G --expect N [--batch 1] [--orderly]
//        [--work-ms 0]
//       a DefaultMQPushConsumer from the first offset whose listener only counts; prints "STARTING {json}" just
//       before start(), "FIRST {json}" at the first message and "DONE {json}" once N were consumed, each with the
//       wall time and the process's CPU time so far, then shuts down (offsets persisted) and prints "STOPPED {}".
//       With --work-ms the listener sleeps that long per call (a slow listener: the queues stay full).
import java.lang.management.ManagementFactory;
import java.util.*;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

public class Throughput {
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    static void emit(String kind) {
        System.out.println(kind + " {\"wall\":" + System.currentTimeMillis() / 1000.0 + ",\"cpu\":" + cpuNanos() / 1e9 + "}");
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            String key = args[i].substring(2);
            boolean flag = i + 1 >= args.length || args[i + 1].startsWith("--");
            o.put(key, flag ? "true" : args[++i]);
        }
        if (args[0].equals("produce")) produce(o);
        else consume(o);
    }

    static void produce(Map<String, String> o) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("rr-throughput-producer");
        producer.setNamesrvAddr(o.get("namesrv"));
        producer.start();
        String topic = o.get("topic");
        int count = Integer.parseInt(o.get("count")), size = Integer.parseInt(o.getOrDefault("size", "128"));
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        List<MessageQueue> queues = producer.fetchPublishMessageQueues(topic);
        long started = System.nanoTime();
        int sent = 0, next = 0;
        while (sent < count) {
            int n = Math.min(256, count - sent);
            List<Message> batch = new ArrayList<>(n);
            for (int i = 0; i < n; i++) batch.add(new Message(topic, "TagA", body));
            producer.send(batch, queues.get(next++ % queues.size()));
            sent += n;
        }
        System.out.println("PRODUCED {\"count\":" + sent + ",\"seconds\":" + (System.nanoTime() - started) / 1e9 + "}");
        producer.shutdown();
    }

    static void consume(Map<String, String> o) throws Exception {
        long expect = Long.parseLong(o.get("expect")), workMs = Long.parseLong(o.getOrDefault("work-ms", "0"));
        AtomicLong count = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(o.get("group"));
        consumer.setNamesrvAddr(o.get("namesrv"));
        consumer.setClientIP("127.0.0.1");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeMessageBatchMaxSize(Integer.parseInt(o.getOrDefault("batch", "1")));
        consumer.subscribe(o.get("topic"), "*");
        if (o.containsKey("orderly")) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                tally(count, msgs.size(), expect, done, workMs);
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                tally(count, msgs.size(), expect, done, workMs);
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        emit("STARTING");
        consumer.start();
        done.await();
        emit("DONE");
        Thread.sleep(1000);  // anything consumed twice would show up in the count meanwhile
        consumer.shutdown();
        System.out.println("STOPPED {\"count\":" + count.get() + "}");
        System.out.flush();
        System.exit(0);  // the orderly consumer's shutdown leaves a non-daemon scheduler thread behind
    }

    static void tally(AtomicLong count, int n, long expect, CountDownLatch done, long workMs) {
        if (workMs > 0) {
            try { Thread.sleep(workMs); } catch (InterruptedException e) { Thread.currentThread().interrupt(); }
        }
        long before = count.getAndAdd(n);
        if (before == 0) emit("FIRST");
        if (before < expect && before + n >= expect) done.countDown();
    }
}
