package sbfed.compat;

import com.azure.json.JsonProviders;
import com.azure.json.JsonWriter;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.OffsetDateTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** The results as JSON: maps, lists, strings, numbers, booleans; times as ISO-8601, bytes as {base64}. */
final class Json {
    private Json() {
    }

    static String write(Object value) {
        StringWriter out = new StringWriter();
        try (JsonWriter writer = JsonProviders.createWriter(out)) {
            writer.writeUntyped(plain(value));
        } catch (IOException error) {
            throw new UncheckedIOException(error);
        }
        return out.toString();
    }

    private static Object plain(Object value) {
        if (value instanceof Map<?, ?> map) {
            Map<String, Object> copy = new LinkedHashMap<>();
            map.forEach((key, item) -> copy.put(String.valueOf(key), plain(item)));
            return copy;
        }
        if (value instanceof Iterable<?> items) {
            List<Object> copy = new ArrayList<>();
            items.forEach(item -> copy.add(plain(item)));
            return copy;
        }
        if (value instanceof byte[] bytes) {
            return Map.of("base64", Base64.getEncoder().encodeToString(bytes));
        }
        if (value instanceof OffsetDateTime || value instanceof Duration || value instanceof Enum<?>
            || value instanceof Character || value instanceof java.util.UUID
            || value instanceof com.azure.core.util.ExpandableStringEnum<?>) {
            return value.toString();
        }
        if (value == null || value instanceof String || value instanceof Number || value instanceof Boolean) {
            return value;
        }
        if (value.getClass().getPackageName().startsWith(MODELS)) {
            return properties(value);
        }
        return value.toString();
    }

    private static final String MODELS = "com.azure.messaging.servicebus.administration.models";

    /** An administration model (queue, rule, filter...) as its getters' values, by property name. */
    private static Map<String, Object> properties(Object model) {
        Map<String, Object> result = new TreeMap<>();
        result.put("kind", model.getClass().getSimpleName());
        for (Method getter : model.getClass().getMethods()) {
            String name = getter.getName();
            int prefix = name.startsWith("get") ? 3 : name.startsWith("is") ? 2 : 0;
            if (prefix == 0 || getter.getParameterCount() > 0 || getter.getDeclaringClass() == Object.class
                || Modifier.isStatic(getter.getModifiers())) {
                continue;
            }
            String property = Character.toLowerCase(name.charAt(prefix)) + name.substring(prefix + 1);
            try {
                result.put(property, plain(getter.invoke(model)));
            } catch (ReflectiveOperationException error) {
                result.put(property, "(" + error + ")");
            }
        }
        return result;
    }
}
