import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMachineRoomNearby;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByConfig;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByMachineRoom;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueConsistentHash;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Java's side of benchmarks/allocation.py: what a group of Java consumers computes between them in one rebalance,
 * every consumer calling its strategy's {@code allocate} with the same lists (the every-consumer loop), and one
 * consumer's call with a new strategy and new queue objects (CONSISTENT_HASH's cold ring: Java builds the ring on
 * every call). The same group as the Python side builds: a topic over brokers {@code hz@broker-N} of 16 queues,
 * consumers {@code hz@10.0.A.B@P}, both Java-sorted.
 *
 * <p>Run by benchmarks/allocation.py as {@code java -cp "LIB/*" AllocationLoop.java QUEUES CONSUMERS REPEAT}
 * over the RocketMQ Maven jars (rocket_rebalance.lab.rocketmq.ensure_jars). Prints one JSON line per
 * measurement: the median of REPEAT timed runs after as many untimed warm-up runs (the JIT compiles the loop
 * first). A loop whose single run would take minutes (CONSISTENT_HASH at 1,000 consumers rebuilds a 10,000-point
 * ring with a replica scan per consumer) is timed over the first {@code sampled} consumers and scaled to all of
 * them: every consumer's call does the same work, and the line says so.
 */
public class AllocationLoop {
    static final String GROUP = "g";

    interface Run {
        void run();
    }

    static double medianSeconds(Run run, int repeat) {
        for (int i = 0; i < repeat; i++) {
            run.run();
        }
        double[] samples = new double[repeat];
        for (int i = 0; i < repeat; i++) {
            long start = System.nanoTime();
            run.run();
            samples[i] = (System.nanoTime() - start) / 1e9;
        }
        Arrays.sort(samples);
        return samples[repeat / 2];
    }

    static void print(String operation, int queues, int consumers, double seconds, int sampled) {
        System.out.printf(
            "{\"operation\": \"%s\", \"queues\": %d, \"consumers\": %d, \"seconds\": %.9e, \"sampled\": %d}%n",
            operation, queues, consumers, seconds, sampled);
    }

    static List<MessageQueue> queues(int count) {
        List<MessageQueue> mqs = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            mqs.add(new MessageQueue("BenchTopic", "hz@broker-" + (i / 16), i % 16));
        }
        Collections.sort(mqs);
        return mqs;
    }

    public static void main(String[] args) {
        int queueCount = Integer.parseInt(args[0]);
        int consumerCount = Integer.parseInt(args[1]);
        int repeat = Integer.parseInt(args[2]);
        List<MessageQueue> mqAll = queues(queueCount);
        List<String> cidAll = new ArrayList<>();
        for (int i = 0; i < consumerCount; i++) {
            cidAll.add("hz@10.0." + (i / 250) + "." + (i % 250) + "@" + (4000 + i));
        }
        Collections.sort(cidAll);

        AllocateMessageQueueByConfig config = new AllocateMessageQueueByConfig();
        config.setMessageQueueList(Collections.singletonList(new MessageQueue("BenchTopic", "hz@broker-0", 0)));
        AllocateMessageQueueByMachineRoom room = new AllocateMessageQueueByMachineRoom();
        room.setConsumeridcs(new HashSet<>(Collections.singletonList("hz")));
        AllocateMachineRoomNearby.MachineRoomResolver prefix = new AllocateMachineRoomNearby.MachineRoomResolver() {
            public String brokerDeployIn(MessageQueue messageQueue) {
                return messageQueue.getBrokerName().split("@")[0];
            }

            public String consumerDeployIn(String clientID) {
                return clientID.split("@")[0];
            }
        };
        AllocateMessageQueueStrategy[] strategies = {
            new AllocateMessageQueueAveragely(),
            new AllocateMessageQueueAveragelyByCircle(),
            new AllocateMessageQueueConsistentHash(),
            config,
            room,
            new AllocateMachineRoomNearby(new AllocateMessageQueueAveragely(), prefix),
        };
        String[] names = {"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM", "MACHINE_ROOM_NEARBY-AVG"};
        for (int s = 0; s < strategies.length; s++) {
            AllocateMessageQueueStrategy strategy = strategies[s];
            long cost = (long) queueCount * consumerCount * (s == 2 ? 10L * consumerCount : 1L);
            int sampled = cost > 2_000_000_000L ? 20 : consumerCount;
            int runs = cost > 2_000_000_000L ? Math.max(3, repeat / 4) : repeat;
            List<String> asking = cidAll.subList(0, sampled);
            double seconds = medianSeconds(() -> {
                for (String cid : asking) {
                    strategy.allocate(GROUP, cid, mqAll, cidAll);
                }
            }, runs);
            print(names[s] + " every-consumer loop", queueCount, consumerCount, seconds * consumerCount / sampled,
                sampled);
        }
        String middle = cidAll.get(consumerCount / 2);
        double cold = medianSeconds(() -> {
            List<MessageQueue> fresh = new ArrayList<>();
            for (MessageQueue mq : mqAll) {
                fresh.add(new MessageQueue(mq.getTopic(), mq.getBrokerName(), mq.getQueueId()));
            }
            new AllocateMessageQueueConsistentHash().allocate(GROUP, middle, fresh, cidAll);
        }, repeat);
        print("CONSISTENT_HASH one view, cold ring", queueCount, consumerCount, cold, 1);
        double avg = medianSeconds(() -> new AllocateMessageQueueAveragely().allocate(GROUP, middle, mqAll, cidAll),
            repeat * 50);
        print("AVG one view", queueCount, consumerCount, avg, 1);
    }
}
