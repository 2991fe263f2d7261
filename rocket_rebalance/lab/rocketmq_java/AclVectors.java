// Records ACL request signatures from the real Java client: each stdin line is one request, tab-separated Base64
// fields "accessKey secretKey securityToken|- body key:value...", where each key and value of a header field is
// Base64 too; each stdout line "SIG <signature>" is the Signature that rocketmq-client's AclClientRPCHook adds to that request
// (after adding AccessKey and SecurityToken itself). Run by rocket_rebalance/lab/acl_vectors.py with the jars on the class
// path:  java -cp "lib/*" AclVectors.java < cases.txt
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

public class AclVectors {
    static String text(String b64) {
        return new String(Base64.getDecoder().decode(b64), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(System.out, true, "US-ASCII");
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t", -1);
            SessionCredentials credentials = parts[2].equals("-")
                ? new SessionCredentials(text(parts[0]), text(parts[1]))
                : new SessionCredentials(text(parts[0]), text(parts[1]), text(parts[2]));
            RemotingCommand request = RemotingCommand.createRequestCommand(10, null);
            for (int i = 4; i < parts.length; i++) {
                String[] kv = parts[i].split(":", -1);
                request.addExtField(text(kv[0]), text(kv[1]));
            }
            request.setBody(Base64.getDecoder().decode(parts[3]));
            new AclClientRPCHook(credentials).doBeforeRequest("127.0.0.1:10911", request);
            out.println("SIG " + request.getExtFields().get(SessionCredentials.SIGNATURE));
        }
    }
}
