import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.remoting.protocol.filter.FilterAPI;
import org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData;

/**
 * Records golden subscription cases from RocketMQ's own FilterAPI (run by rocket_rebalance.lab.golden_subscriptions
 * with the Maven jars on the class path). Reads one JSON object per line on stdin, {"expression": ..., "type": ...},
 * and writes one per line on stdout: what the Java client builds for it. "type" null is the push consumer's
 * subscribe(topic, String) path (buildSubscriptionData); otherwise subscribe(topic, MessageSelector) (build).
 */
public final class RecordSubscriptions {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            JSONObject input = JSON.parseObject(line);
            String expression = input.getString("expression");
            String type = input.getString("type");
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("expression", expression);
            row.put("type", type);
            try {
                SubscriptionData data = type == null
                    ? FilterAPI.buildSubscriptionData("T", expression)
                    : FilterAPI.build("T", expression, type);
                data.setSubVersion(0L);
                List<String> tags = new ArrayList<>(data.getTagsSet());
                Collections.sort(tags);
                List<Integer> codes = new ArrayList<>(data.getCodeSet());
                Collections.sort(codes);
                row.put("subString", data.getSubString());
                row.put("expressionType", data.getExpressionType());
                row.put("tagsSet", tags);
                row.put("codeSet", codes);
                row.put("wire", JSON.parseObject(JSON.toJSONString(data)));
                row.put("error", null);
            } catch (Exception e) {
                row.put("error", e.getClass().getSimpleName());
            }
            out.println(JSON.toJSONString(row, com.alibaba.fastjson.serializer.SerializerFeature.WriteMapNullValue));
        }
    }
}
