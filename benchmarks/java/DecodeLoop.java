// The Java side of benchmarks/decode_bodies.py: what RocketMQ 5.3.3's consumer spends decoding a pull answer, per
// message. Reads "NAME <Base64 pull answer>" lines until a blank line, then answers each "ROUND <repeats>" line with
// "ROUND {name: microseconds per message, ...}": every answer decoded <repeats> times as PullAPIWrapper
// .processPullResult decodes one (MessageDecoder.decodesBatch, bodies read and inflated, then the split of inner
// batches). Run with the RocketMQ jars on the class path:  java -cp "lib/*" DecodeLoop.java
import java.io.*;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;

public class DecodeLoop {
    static long sink;

    static int decode(byte[] answer) throws Exception {
        List<MessageExt> decoded = MessageDecoder.decodesBatch(ByteBuffer.wrap(answer), true, true, true);
        List<MessageExt> messages = new ArrayList<>();
        for (MessageExt m : decoded) {
            if (MessageSysFlag.check(m.getSysFlag(), MessageSysFlag.INNER_BATCH_FLAG)
                && MessageSysFlag.check(m.getSysFlag(), MessageSysFlag.NEED_UNWRAP_FLAG)) {
                MessageDecoder.decodeMessage(m, messages);
            } else {
                messages.add(m);
            }
        }
        for (MessageExt m : messages) sink += m.getBody().length;
        return messages.size();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        Map<String, byte[]> answers = new LinkedHashMap<>();
        String line;
        while ((line = in.readLine()) != null && !line.isEmpty()) {
            String[] parts = line.split(" ", 2);
            answers.put(parts[0], Base64.getDecoder().decode(parts[1]));
        }
        while ((line = in.readLine()) != null) {
            int repeats = Integer.parseInt(line.split(" ")[1]);
            StringJoiner out = new StringJoiner(",", "{", "}");
            for (Map.Entry<String, byte[]> answer : answers.entrySet()) {
                long began = System.nanoTime();
                int messages = 0;
                for (int i = 0; i < repeats; i++) messages += decode(answer.getValue());
                out.add("\"" + answer.getKey() + "\":" + (System.nanoTime() - began) / 1e3 / messages);
            }
            System.out.println("ROUND " + out);
            System.out.flush();
        }
        System.err.println(sink);
    }
}
