package sbfed.compat;

import com.azure.core.amqp.AmqpRetryOptions;
import com.azure.core.amqp.exception.AmqpException;
import com.azure.core.exception.HttpResponseException;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusException;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What every scenario shares: the namespace it talks to (from the environment java_runner.py sets), clients with
 * short timeouts, and errors described the same way everywhere.
 */
final class Harness {
    private Harness() {
    }

    static String connectionString() {
        return required("SB_CONNECTION_STRING");
    }

    static String adminConnectionString() {
        return required("SB_ADMIN_CONNECTION_STRING");
    }

    static String required(String name) {
        String value = System.getenv(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalStateException(name + " is not set (tests/compat/java_runner.py sets it)");
        }
        return value;
    }

    /** The connection string with another key in it (a wrong one for the authorization checks). */
    static String withKey(String connectionString, String key) {
        return connectionString.replaceAll("SharedAccessKey=[^;]*", "SharedAccessKey=" + key);
    }

    /** A client builder whose operations give up after `timeout`, retrying `retries` times. */
    static ServiceBusClientBuilder builder(String connectionString, int retries, Duration timeout) {
        return new ServiceBusClientBuilder().connectionString(connectionString)
            .retryOptions(new AmqpRetryOptions().setMaxRetries(retries).setTryTimeout(timeout)
                .setDelay(Duration.ofMillis(200)));
    }

    static ServiceBusClientBuilder builder() {
        return builder(connectionString(), 3, Duration.ofSeconds(10));
    }

    /** The harness itself: what the scenarios run with (test_java_harness.py). */
    static Object describe(String[] args) {
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("java", System.getProperty("java.version"));
        result.put("sdk", ServiceBusClientBuilder.class.getPackage().getImplementationVersion());
        result.put("trustStore", System.getProperty("javax.net.ssl.trustStore"));
        result.put("connectionString", connectionString());
        return result;
    }

    /**
     * The fields a test asserts on: the exception's class, the Service Bus reason and whether the SDK deems it
     * transient (ServiceBusException), the AMQP error condition under it, the HTTP status (administration client).
     */
    static Map<String, Object> describe(Throwable error) {
        Map<String, Object> described = new LinkedHashMap<>();
        described.put("name", error.getClass().getSimpleName());
        described.put("message", String.valueOf(error.getMessage()));
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause instanceof ServiceBusException serviceBus && !described.containsKey("reason")) {
                described.put("reason", serviceBus.getReason().toString());
                described.put("transient", serviceBus.isTransient());
            }
            if (cause instanceof AmqpException amqp && amqp.getErrorCondition() != null
                && !described.containsKey("condition")) {
                described.put("condition", amqp.getErrorCondition().getErrorCondition());
                described.put("amqpMessage", String.valueOf(amqp.getMessage()));
            }
            if (cause instanceof HttpResponseException http && !described.containsKey("statusCode")) {
                described.put("statusCode", http.getResponse().getStatusCode());
                described.put("exception", cause.getClass().getSimpleName());
            }
            if (cause.getCause() == cause) {
                break;
            }
        }
        return described;
    }

    interface Operation {
        Object run() throws Exception;
    }

    /** `{value}` of an operation, or `{error}`: how it failed. */
    static Map<String, Object> outcome(Operation operation) {
        Map<String, Object> result = new LinkedHashMap<>();
        try {
            result.put("value", operation.run());
        } catch (Exception error) {
            result.put("error", describe(error));
        }
        return result;
    }

    /** The outcome and how long the operation took, in ms (an error is an answer, not a client timeout). */
    static Map<String, Object> timed(Operation operation) {
        long started = System.nanoTime();
        Map<String, Object> result = outcome(operation);
        result.put("ms", (System.nanoTime() - started) / 1_000_000);
        return result;
    }

    /** A map of the pairs given, in order (Map.of has no order and refuses nulls). */
    static Map<String, Object> map(Object... pairs) {
        Map<String, Object> result = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            result.put((String) pairs[i], pairs[i + 1]);
        }
        return result;
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException error) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(error);
        }
    }
}
