// Records stored messages as RocketMQ 5.3.3 writes them and as its Java consumer reads them back. Each stdin line is
// one case as JSON: the fields of a MessageExt (hosts as Base64 address bytes and a port), a "body" (Base64) or the
// "inner" messages of a batch ({flag, body, properties}, laid out by MessageDecoder.encodeMessages as a producer's
// MessageBatch is), and a "compression" (LZ4, ZSTD, ZLIB or null) with which 5.3.3's own Compressor (what
// DefaultMQProducer calls, at compressLevel 5) compresses that body. The record is laid out by MessageDecoder.encode
// with the broker's BODYCRC (CRC32 of the stored body). Each stdout line "CASE <json>" has the record (Base64), the
// compressed body, and the messages Java's consumer makes of the record: MessageDecoder.decodesBatch as
// PullAPIWrapper.processPullResult calls it, then its unwrap of INNER_BATCH + NEED_UNWRAP records
// (MessageDecoder.decodeMessage). Run by rocket_rebalance/lab/stored_vectors.py with the jars on the class path:
//   java -cp "lib/*" StoredVectors.java < cases.jsonl
import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.io.*;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.compression.CompressorFactory;
import org.apache.rocketmq.common.message.*;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;

public class StoredVectors {
    static final Base64.Encoder B64 = Base64.getEncoder();

    static byte[] bytes(String b64) {
        return Base64.getDecoder().decode(b64);
    }

    static InetSocketAddress host(JSONArray host) throws IOException {
        return new InetSocketAddress(InetAddress.getByAddress(bytes(host.getString(0))), host.getIntValue(1));
    }

    static Map<String, String> properties(JSONObject json) {
        Map<String, String> map = new LinkedHashMap<>();
        for (String key : json.keySet()) map.put(key, json.getString(key));
        return map;
    }

    static JSONArray hostJson(java.net.SocketAddress address) {
        InetSocketAddress host = (InetSocketAddress) address;
        JSONArray json = new JSONArray();
        json.add(B64.encodeToString(host.getAddress().getAddress()));
        json.add(host.getPort());
        return json;
    }

    static JSONObject seen(MessageExt m) {
        JSONObject json = new JSONObject(true);
        json.put("topic", m.getTopic());
        json.put("queueId", m.getQueueId());
        json.put("queueOffset", m.getQueueOffset());
        json.put("commitLogOffset", m.getCommitLogOffset());
        json.put("flag", m.getFlag());
        json.put("sysFlag", m.getSysFlag());
        json.put("body", m.getBody() == null ? null : B64.encodeToString(m.getBody()));
        json.put("properties", new TreeMap<>(m.getProperties()));
        json.put("bornTimestamp", m.getBornTimestamp());
        json.put("bornHost", hostJson(m.getBornHost()));
        json.put("storeTimestamp", m.getStoreTimestamp());
        json.put("storeHost", hostJson(m.getStoreHost()));
        json.put("reconsumeTimes", m.getReconsumeTimes());
        json.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
        json.put("bodyCRC", m.getBodyCRC());
        json.put("msgId", m.getMsgId());
        json.put("offsetMsgId", ((MessageClientExt) m).getOffsetMsgId());
        return json;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            JSONObject c = JSON.parseObject(line);
            byte[] body;
            int sysFlag = c.getIntValue("sysFlag");
            if (c.containsKey("inner")) {
                List<Message> batch = new ArrayList<>();
                for (Object o : c.getJSONArray("inner")) {
                    JSONObject inner = (JSONObject) o;
                    Message m = new Message();
                    m.setFlag(inner.getIntValue("flag"));
                    m.setBody(bytes(inner.getString("body")));
                    MessageAccessor.setProperties(m, properties(inner.getJSONObject("properties")));
                    batch.add(m);
                }
                body = MessageDecoder.encodeMessages(batch);
            } else {
                body = bytes(c.getString("body"));
            }
            String compression = c.getString("compression");
            if (compression != null) {
                CompressionType type = CompressionType.of(compression);
                body = CompressorFactory.getCompressor(type).compress(body, 5);
                sysFlag |= MessageSysFlag.COMPRESSED_FLAG | type.getCompressionFlag();
            }
            MessageExt ext = new MessageExt();
            ext.setTopic(c.getString("topic"));
            ext.setQueueId(c.getIntValue("queueId"));
            ext.setFlag(c.getIntValue("flag"));
            ext.setQueueOffset(c.getLongValue("queueOffset"));
            ext.setCommitLogOffset(c.getLongValue("commitLogOffset"));
            ext.setBornTimestamp(c.getLongValue("bornTimestamp"));
            ext.setBornHost(host(c.getJSONArray("bornHost")));
            ext.setStoreTimestamp(c.getLongValue("storeTimestamp"));
            ext.setStoreHost(host(c.getJSONArray("storeHost")));
            if (ext.getBornHost() instanceof InetSocketAddress && ((InetSocketAddress) ext.getBornHost()).getAddress().getAddress().length == 16)
                sysFlag |= MessageSysFlag.BORNHOST_V6_FLAG;
            if (((InetSocketAddress) ext.getStoreHost()).getAddress().getAddress().length == 16)
                sysFlag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG;
            ext.setSysFlag(sysFlag);
            ext.setReconsumeTimes(c.getIntValue("reconsumeTimes"));
            ext.setPreparedTransactionOffset(c.getLongValue("preparedTransactionOffset"));
            MessageAccessor.setProperties(ext, properties(c.getJSONObject("properties")));
            ext.setBody(body);
            ext.setBodyCRC(UtilAll.crc32(body));
            byte[] record = MessageDecoder.encode(ext, false);

            // What the consumer does with a pull answer holding the record (PullAPIWrapper.processPullResult).
            List<MessageExt> decoded = MessageDecoder.decodesBatch(ByteBuffer.wrap(record), true, true, true);
            List<MessageExt> unwrapped = new ArrayList<>();
            for (MessageExt m : decoded) {
                if (MessageSysFlag.check(m.getSysFlag(), MessageSysFlag.INNER_BATCH_FLAG)
                    && MessageSysFlag.check(m.getSysFlag(), MessageSysFlag.NEED_UNWRAP_FLAG)) {
                    MessageDecoder.decodeMessage(m, unwrapped);
                } else {
                    unwrapped.add(m);
                }
            }
            JSONObject result = new JSONObject(true);
            result.put("record", B64.encodeToString(record));
            result.put("storedBody", B64.encodeToString(body));
            JSONArray messages = new JSONArray();
            for (MessageExt m : unwrapped) messages.add(seen(m));
            result.put("messages", messages);
            out.println("CASE " + result.toJSONString());
        }
    }
}
