// A minimal MCP server over stdio in plain Java (no libraries), for the launch-shape test of `java -jar`: answers
// initialize, tools/list and tools/call of one tool; any other request is "method not found".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class Server {
    private static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*(\"[^\"]*\"|-?\\d+)");
    private static final Pattern METHOD = Pattern.compile("\"method\"\\s*:\\s*\"([^\"]+)\"");
    private static final Pattern VERSION = Pattern.compile("\"protocolVersion\"\\s*:\\s*\"([^\"]+)\"");

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            Matcher id = ID.matcher(line);
            Matcher method = METHOD.matcher(line);
            if (!id.find() || !method.find()) {
                continue;
            }
            String result;
            switch (method.group(1)) {
                case "initialize": {
                    Matcher v = VERSION.matcher(line);
                    String version = v.find() ? v.group(1) : "2025-11-25";
                    result = "{\"protocolVersion\":\"" + version + "\",\"capabilities\":{\"tools\":{}},"
                            + "\"serverInfo\":{\"name\":\"java-hello\",\"version\":\"1.0.0\"}}";
                    break;
                }
                case "ping":
                    result = "{}";
                    break;
                case "tools/list":
                    result = "{\"tools\":[{\"name\":\"hello\",\"description\":\"Says hello from Java\","
                            + "\"inputSchema\":{\"type\":\"object\",\"properties\":{}}}]}";
                    break;
                case "tools/call":
                    result = "{\"content\":[{\"type\":\"text\",\"text\":\"hello from java\"}]}";
                    break;
                default:
                    System.out.println("{\"jsonrpc\":\"2.0\",\"id\":" + id.group(1)
                            + ",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}");
                    System.out.flush();
                    continue;
            }
            System.out.println("{\"jsonrpc\":\"2.0\",\"id\":" + id.group(1) + ",\"result\":" + result + "}");
            System.out.flush();
        }
    }
}
