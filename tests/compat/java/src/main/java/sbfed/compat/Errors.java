package sbfed.compat;

import static sbfed.compat.Harness.map;
import static sbfed.compat.Harness.timed;
import static sbfed.compat.Messages.bodies;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusMessageBatch;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Every error class a Java client meets, each as the SDK reports it (see test_java_errors.py). Clients do not
 * retry here, so each error shows at once and its time is the broker's.
 */
final class Errors {
    private final ServiceBusClientBuilder builder = noRetry(Harness.connectionString());

    private Errors() {
    }

    static Object run(String[] args) {
        Errors scenario = new Errors();
        return map("notFound", scenario.entityNotFound(), "unauthorized", scenario.wrongKey(),
            "size", scenario.tooLarge(), "sessions", scenario.sessionCannotBeLocked(), "locks", scenario.locks());
    }

    private static ServiceBusClientBuilder noRetry(String connectionString) {
        return Harness.builder(connectionString, 0, Duration.ofSeconds(10));
    }

    private static Object send(ServiceBusSenderClient sender, ServiceBusMessage message) {
        sender.sendMessage(message);
        return null;
    }

    private Object entityNotFound() {
        try (ServiceBusSenderClient sender = builder.sender().queueName("no-such-queue").buildClient();
             ServiceBusReceiverClient receiver = builder.receiver().queueName("no-such-queue").buildClient()) {
            return map("send", timed(() -> send(sender, new ServiceBusMessage("x"))),
                "receive", timed(() -> bodies(receiver.receiveMessages(1, Duration.ofSeconds(2)))),
                "peek", timed(() -> receiver.peekMessage()));
        }
    }

    private Object wrongKey() {
        String key = Base64.getEncoder().encodeToString("not the key".getBytes(StandardCharsets.UTF_8));
        ServiceBusClientBuilder wrong = noRetry(Harness.withKey(Harness.connectionString(), key));
        try (ServiceBusSenderClient sender = wrong.sender().queueName("errors").buildClient();
             ServiceBusReceiverClient receiver = wrong.receiver().queueName("errors").buildClient()) {
            return map("send", timed(() -> send(sender, new ServiceBusMessage("x"))),
                "peek", timed(() -> receiver.peekMessage()));
        }
    }

    private Object tooLarge() {
        try (ServiceBusSenderClient sender = builder.sender().queueName("errors").buildClient()) {
            Map<String, Object> big = timed(() -> send(sender, new ServiceBusMessage(new byte[300 * 1024])));
            ServiceBusMessageBatch batch = sender.createMessageBatch();
            Map<String, Object> fitsBatch = Harness.outcome(() ->
                batch.tryAddMessage(new ServiceBusMessage(new byte[300 * 1024])));
            Map<String, Object> list = timed(() -> {
                sender.sendMessages(List.of(0, 1, 2).stream().map(i -> new ServiceBusMessage(new byte[100 * 1024]))
                    .collect(Collectors.toList()));
                return null;
            });
            sender.sendMessage(new ServiceBusMessage("still serving"));
            try (ServiceBusReceiverClient receiver = builder.receiver().queueName("errors")
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
                List<Integer> after = Messages.receiveAll(receiver, 4, Duration.ofSeconds(5)).stream()
                    .map(m -> m.getBody().toBytes().length).collect(Collectors.toList());
                return map("big", big, "fitsBatch", fitsBatch, "maxSizeInBytes", batch.getMaxSizeInBytes(),
                    "list", list, "after", after);
            }
        }
    }

    private Object sessionCannotBeLocked() {
        try (ServiceBusSenderClient sender = builder.sender().queueName("error-sessions").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("s").setSessionId("held"));
        }
        // Another builder: clients of one builder share a connection, where the SDK hands out the link it
        // already has for a session (the link's name is the session id) instead of asking the broker again.
        try (ServiceBusSessionReceiverClient holder = builder.sessionReceiver().queueName("error-sessions")
                .buildClient();
             ServiceBusSessionReceiverClient second = noRetry(Harness.connectionString()).sessionReceiver()
                .queueName("error-sessions").buildClient()) {
            ServiceBusReceiverClient held = holder.acceptSession("held");
            Map<String, Object> refused = timed(() -> second.acceptSession("held"));
            held.close();
            return map("second", refused);
        }
    }

    /**
     * One message's lock runs out (lock duration 5 s) while another's is renewed half-way: settling the first
     * fails with MESSAGE_LOCK_LOST, the renewed one completes.
     */
    private Object locks() {
        try (ServiceBusSenderClient sender = builder.sender().queueName("locks").buildClient()) {
            sender.sendMessages(List.of(new ServiceBusMessage("expires").setMessageId("expires"),
                new ServiceBusMessage("renewed").setMessageId("renewed")));
        }
        try (ServiceBusReceiverClient receiver = builder.receiver().queueName("locks")
            .maxAutoLockRenewDuration(Duration.ZERO).disableAutoComplete().buildClient()) {
            Map<String, ServiceBusReceivedMessage> byBody = Messages.receiveAll(receiver, 2).stream()
                .collect(Collectors.toMap(m -> m.getBody().toString(), m -> m));
            OffsetDateTime lockedUntil = byBody.get("renewed").getLockedUntil();
            Harness.sleep(3000);
            OffsetDateTime renewedUntil = receiver.renewMessageLock(byBody.get("renewed"));
            Harness.sleep(3000);
            Map<String, Object> lost = timed(() -> {
                receiver.complete(byBody.get("expires"));
                return null;
            });
            Map<String, Object> renewedComplete = Harness.outcome(() -> {
                receiver.complete(byBody.get("renewed"));
                return null;
            });
            return map("count", byBody.size(), "lockedUntil", lockedUntil, "renewedUntil", renewedUntil,
                "lost", lost, "renewedComplete", renewedComplete);
        }
    }
}
