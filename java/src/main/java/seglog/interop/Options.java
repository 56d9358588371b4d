package seglog.interop;

import java.util.Map;
import java.util.Properties;

/** A scenario's key=value arguments; keys with a "client." prefix go to the client as they are. */
final class Options {
    private final Map<String, String> values;

    Options(Map<String, String> values) {
        this.values = values;
    }

    String get(String key) {
        String v = values.get(key);
        if (v == null) throw new IllegalArgumentException("missing " + key + "=");
        return v;
    }

    String get(String key, String fallback) {
        return values.getOrDefault(key, fallback);
    }

    int integer(String key, int fallback) {
        return Integer.parseInt(get(key, Integer.toString(fallback)));
    }

    /** The client's properties: bootstrap.servers, then every client.* key. */
    Properties client() {
        Properties p = new Properties();
        p.put("bootstrap.servers", get("bootstrap"));
        values.forEach((k, v) -> {
            if (k.startsWith("client.")) p.put(k.substring("client.".length()), v);
        });
        return p;
    }
}
