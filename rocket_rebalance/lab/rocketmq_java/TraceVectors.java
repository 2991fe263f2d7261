// Records message trace records from the real Java client: each stdin line is one JSON TraceContext,
// {"type": "SubBefore"|"SubAfter", "timestamp", "region", "group", "requestId", "costTime", "success", "contextCode",
//  "beans": [{"msgId", "keys" (null allowed), "retryTimes", "topic"}]}; each stdout line "REC <json>" is what
// rocketmq-client's TraceDataEncoder.encoderFromContextBean makes of it: {"transData": ..., "transKey": [...]}
// (transKey sorted: Java keeps a HashSet). Run by rocket_rebalance/lab/trace_vectors.py with the jars on the class
// path:  java -cp "lib/*" TraceVectors.java < cases.jsonl
import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.rocketmq.client.AccessChannel;
import org.apache.rocketmq.client.trace.TraceBean;
import org.apache.rocketmq.client.trace.TraceContext;
import org.apache.rocketmq.client.trace.TraceDataEncoder;
import org.apache.rocketmq.client.trace.TraceTransferBean;
import org.apache.rocketmq.client.trace.TraceType;

public class TraceVectors {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            JSONObject input = JSON.parseObject(line);
            TraceContext context = new TraceContext();
            context.setTraceType(TraceType.valueOf(input.getString("type")));
            context.setTimeStamp(input.getLongValue("timestamp"));
            context.setRegionId(input.getString("region"));
            context.setGroupName(input.getString("group"));
            context.setRequestId(input.getString("requestId"));
            context.setCostTime(input.getIntValue("costTime"));
            context.setSuccess(input.getBooleanValue("success"));
            context.setContextCode(input.getIntValue("contextCode"));
            context.setAccessChannel(AccessChannel.LOCAL);
            List<TraceBean> beans = new ArrayList<>();
            JSONArray given = input.getJSONArray("beans");
            for (int i = 0; i < given.size(); i++) {
                JSONObject b = given.getJSONObject(i);
                TraceBean bean = new TraceBean();
                bean.setMsgId(b.getString("msgId"));
                bean.setKeys(b.getString("keys"));
                bean.setRetryTimes(b.getIntValue("retryTimes"));
                bean.setTopic(b.getString("topic"));
                beans.add(bean);
            }
            context.setTraceBeans(beans);
            TraceTransferBean transfer = TraceDataEncoder.encoderFromContextBean(context);
            JSONObject result = new JSONObject(new LinkedHashMap<>());
            result.put("transData", transfer.getTransData());
            result.put("transKey", new TreeSet<>(transfer.getTransKey()));
            out.println("REC " + result.toJSONString());
        }
    }
}
