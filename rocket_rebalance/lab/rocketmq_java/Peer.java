// A Java DefaultMQPushConsumer for mixed-group tests and the demo: the real Apache RocketMQ client, printing what it
// does as parseable lines on stdout (flushed): "STARTED <json>", "ALLOC <json>" (a full snapshot of one topic's
// queues each time its allocation changes), "MSG <json>" (one per consumed message, with the times its work began
// and ended, its sysFlag and its body's size and SHA-256) and "STOPPED <json>" after a graceful shutdown
// (SIGTERM). Run with the fetched jars on the class path:
//   java -cp "lib/*" Peer.java --namesrv 127.0.0.1:9876 --group G --instance java-1 --topic T [--strategy AVG]
//        [--orderly] [--consume-from first|last] [--work-ms 0] [--virtual-nodes 10] [--tags EXPR | --sql EXPR]
// (--tags / --sql: every --topic is subscribed with that tag or SQL92 expression instead of "*").
//        [--answers] [--batch N] [--max-reconsume-times N] [--namespace NS] [--trace] [--pull-batch N]
//        [--pull-threshold N]
// --answers: the listener answers by the messages' tags, as tests/rocketmq/test_listener_results.py asks of ours
// (the positive control): "later" on its first delivery, RECONSUME_LATER; "dlq", RECONSUME_LATER with delay level -1;
// "rest" on its first delivery, ackIndex just before it (its batch's messages before it consumed); "poison", orderly,
// SUSPEND_CURRENT_QUEUE_A_MOMENT for 100 ms. --batch: consumeMessageBatchMaxSize; --max-reconsume-times: as named;
// --pull-batch: pullBatchSize; --pull-threshold: pullThresholdForQueue (a consumer that stays behind its queues).
// --namespace: setNamespace (v1): --group and --topic are given without it; ALLOC names the wrapped topic (Java's
// MessageQueueListener is given the wire's), MSG the message's topic as the listener reads it (unwrapped).
// --trace: setEnableTrace (enableMsgTrace): SubBefore/SubAfter records to RMQ_SYS_TRACE_TOPIC, as in
// tests/rocketmq/test_trace.py (the positive control for ours).
// With $ROCKETMQ_ACCESS_KEY and $ROCKETMQ_SECRET_KEY set, every request is signed (AclClientRPCHook).
// The instance name may carry backslash-u escapes of UTF-16 units (non-ASCII IDs survive any locale that way).
import java.security.MessageDigest;
import java.util.*;
import org.apache.rocketmq.client.consumer.*;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.consumer.rebalance.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.*;

public class Peer {
    static synchronized void emit(String kind, String json) {
        System.out.println(kind + " " + json);
        System.out.flush();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            if (s.startsWith("\\u", i) && i + 6 <= s.length()) {
                b.append((char) Integer.parseInt(s.substring(i + 2, i + 6), 16));
                i += 5;
            } else b.append(s.charAt(i));
        }
        return b.toString();
    }

    static String queues(Collection<MessageQueue> mqs) {
        List<MessageQueue> sorted = new ArrayList<>(mqs);
        Collections.sort(sorted);
        StringJoiner j = new StringJoiner(",", "[", "]");
        for (MessageQueue mq : sorted) j.add("{\"brokerName\":" + quote(mq.getBrokerName()) + ",\"queueId\":" + mq.getQueueId() + "}");
        return j.toString();
    }

    public static void main(String[] args) throws Exception {
        Map<String, List<String>> o = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--")) throw new IllegalArgumentException("unexpected argument " + args[i]);
            String key = args[i].substring(2);
            boolean flag = i + 1 >= args.length || args[i + 1].startsWith("--");
            o.computeIfAbsent(key, k -> new ArrayList<>()).add(flag ? "true" : args[++i]);
        }
        String group = o.get("group").get(0), instance = unescape(o.get("instance").get(0));
        String strategy = o.getOrDefault("strategy", List.of("AVG")).get(0);
        long workMs = Long.parseLong(o.getOrDefault("work-ms", List.of("0")).get(0));
        boolean orderly = o.containsKey("orderly"), answers = o.containsKey("answers");

        // ACL credentials come from the environment, as the Python CLI reads them: never on a command line.
        String accessKey = System.getenv("ROCKETMQ_ACCESS_KEY"), secretKey = System.getenv("ROCKETMQ_SECRET_KEY");
        DefaultMQPushConsumer consumer = accessKey == null
            ? new DefaultMQPushConsumer(group)
            : new DefaultMQPushConsumer(group, new org.apache.rocketmq.acl.common.AclClientRPCHook(
                new org.apache.rocketmq.acl.common.SessionCredentials(accessKey, secretKey)));
        consumer.setNamesrvAddr(o.get("namesrv").get(0));
        consumer.setEnableTrace(o.containsKey("trace"));  // read at start(), where the trace dispatcher is made
        if (o.containsKey("namespace")) consumer.setNamespace(o.get("namespace").get(0));  // before subscribe wraps
        consumer.setClientIP("127.0.0.1");
        consumer.setInstanceName(instance);
        consumer.setPollNameServerInterval(1000);
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.setConsumeFromWhere("last".equals(o.getOrDefault("consume-from", List.of("first")).get(0))
            ? ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET : ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        switch (strategy) {
            case "AVG": consumer.setAllocateMessageQueueStrategy(new AllocateMessageQueueAveragely()); break;
            case "AVG_BY_CIRCLE": consumer.setAllocateMessageQueueStrategy(new AllocateMessageQueueAveragelyByCircle()); break;
            case "CONSISTENT_HASH":
                int nodes = Integer.parseInt(o.getOrDefault("virtual-nodes", List.of("10")).get(0));
                consumer.setAllocateMessageQueueStrategy(new AllocateMessageQueueConsistentHash(nodes));
                break;
            default: throw new IllegalArgumentException("unknown strategy " + strategy);
        }
        if (o.containsKey("batch")) consumer.setConsumeMessageBatchMaxSize(Integer.parseInt(o.get("batch").get(0)));
        if (o.containsKey("pull-batch")) consumer.setPullBatchSize(Integer.parseInt(o.get("pull-batch").get(0)));
        if (o.containsKey("pull-threshold"))
            consumer.setPullThresholdForQueue(Integer.parseInt(o.get("pull-threshold").get(0)));
        if (o.containsKey("max-reconsume-times"))
            consumer.setMaxReconsumeTimes(Integer.parseInt(o.get("max-reconsume-times").get(0)));
        for (String topic : o.get("topic")) {
            if (o.containsKey("sql")) consumer.subscribe(topic, MessageSelector.bySql(o.get("sql").get(0)));
            else consumer.subscribe(topic, o.getOrDefault("tags", List.of("*")).get(0));
        }
        String id = quote("127.0.0.1@" + instance);
        consumer.setMessageQueueListener((topic, all, mine) ->
            emit("ALLOC", "{\"client\":" + id + ",\"topic\":" + quote(topic) + ",\"queues\":" + queues(mine) + "}"));

        if (orderly) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                consume(id, msgs, workMs);
                if (answers && msgs.stream().anyMatch(m -> "poison".equals(m.getTags()))) {
                    ctx.setSuspendCurrentQueueTimeMillis(100);
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                consume(id, msgs, workMs);
                return answers ? answer(msgs, ctx) : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.shutdown();
            emit("STOPPED", "{\"client\":" + id + "}");
        }));
        consumer.start();
        emit("STARTED", "{\"client\":" + id + "}");
        Thread.currentThread().join();
    }

    static ConsumeConcurrentlyStatus answer(List<MessageExt> msgs, ConsumeConcurrentlyContext ctx) {
        for (int i = 0; i < msgs.size(); i++) {
            MessageExt m = msgs.get(i);
            boolean first = m.getReconsumeTimes() == 0;
            if ("dlq".equals(m.getTags())) {
                ctx.setDelayLevelWhenNextConsume(-1);
                return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
            if ("later".equals(m.getTags()) && first) return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            if ("rest".equals(m.getTags()) && first) {
                ctx.setAckIndex(i - 1);
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            }
        }
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    }

    static String sha256(byte[] body) {
        try {
            StringBuilder hex = new StringBuilder();
            for (byte b : MessageDigest.getInstance("SHA-256").digest(body == null ? new byte[0] : body)) hex.append(String.format("%02x", b));
            return hex.toString();
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static void consume(String id, List<MessageExt> msgs, long workMs) {
        for (MessageExt m : msgs) {
            double t0 = System.currentTimeMillis() / 1000.0;
            if (workMs > 0) {
                try { Thread.sleep(workMs); } catch (InterruptedException e) { Thread.currentThread().interrupt(); }
            }
            double t1 = System.currentTimeMillis() / 1000.0;
            emit("MSG", "{\"client\":" + id + ",\"topic\":" + quote(m.getTopic()) + ",\"broker\":" + quote(m.getBrokerName())
                + ",\"queue\":" + m.getQueueId() + ",\"offset\":" + m.getQueueOffset() + ",\"msgId\":" + quote(m.getMsgId())
                + ",\"tags\":" + quote(m.getTags() == null ? "" : m.getTags()) + ",\"reconsumeTimes\":" + m.getReconsumeTimes() + ",\"t0\":" + t0 + ",\"t1\":" + t1
                + ",\"sysFlag\":" + m.getSysFlag() + ",\"size\":" + (m.getBody() == null ? 0 : m.getBody().length) + ",\"sha256\":\"" + sha256(m.getBody()) + "\"}");
        }
    }
}
