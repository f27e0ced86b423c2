package sbfed.compat;

import static sbfed.compat.Harness.map;
import static sbfed.compat.Messages.bodies;
import static sbfed.compat.Messages.receiveAll;

import com.azure.core.amqp.AmqpTransportType;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.SubQueue;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * The Java SDK as a client with no emulator mode uses the broker: the connection string in Azure's form (TLS, the
 * broker's certificate trusted through the trust store java_runner.py makes), over AMQPS and over WebSockets
 * (AMQP_WEB_SOCKETS, the WebSocket port as the custom endpoint address). Each transport named in the arguments
 * sends, receives and settles, reads the dead-letter queue, peeks, schedules and cancels, renews a lock, uses a
 * session and its state, and tries a wrong key.
 */
final class Transports {
    private Transports() {
    }

    static Object run(String[] transports) {
        Map<String, Object> result = new LinkedHashMap<>();
        for (String transport : transports) {
            result.put(transport, over(transport));
        }
        return result;
    }

    private static ServiceBusClientBuilder builder(String transport, String connectionString) {
        ServiceBusClientBuilder builder = Harness.builder(connectionString, 0, Duration.ofSeconds(20));
        if (transport.equals("websocket")) {
            builder.transportType(AmqpTransportType.AMQP_WEB_SOCKETS)
                .customEndpointAddress("https://localhost:" + Harness.required("SB_WEBSOCKET_PORT"));
        }
        return builder;
    }

    private static Object over(String transport) {
        ServiceBusClientBuilder builder = builder(transport, Harness.connectionString());
        Map<String, Object> result = map("settle", settle(builder, "settle-" + transport),
            "management", management(builder, "q-" + transport), "session", session(builder, "sessions-" + transport));
        String key = Base64.getEncoder().encodeToString("not the key".getBytes(StandardCharsets.UTF_8));
        ServiceBusClientBuilder wrong = builder(transport, Harness.withKey(Harness.connectionString(), key));
        try (ServiceBusSenderClient sender = wrong.sender().queueName("q").buildClient()) {
            result.put("wrongKey", Harness.outcome(() -> {
                sender.sendMessage(new ServiceBusMessage("never"));
                return null;
            }));
        }
        return result;
    }

    private static Object settle(ServiceBusClientBuilder builder, String queue) {
        try (ServiceBusSenderClient sender = builder.sender().queueName(queue).buildClient();
             ServiceBusReceiverClient receiver = builder.receiver().queueName(queue).buildClient();
             ServiceBusReceiverClient deadLetters = builder.receiver().queueName(queue)
                 .subQueue(SubQueue.DEAD_LETTER_QUEUE).buildClient()) {
            sender.sendMessages(List.of("0", "1", "2").stream()
                .map(id -> new ServiceBusMessage("message " + id).setMessageId(id)).collect(Collectors.toList()));
            Map<String, ServiceBusReceivedMessage> byId = receiveAll(receiver, 3, Duration.ofSeconds(5)).stream()
                .collect(Collectors.toMap(ServiceBusReceivedMessage::getMessageId, m -> m));
            receiver.complete(byId.get("0"));
            receiver.deadLetter(byId.get("1"), new DeadLetterOptions().setDeadLetterReason("bad")
                .setDeadLetterErrorDescription("tested"));
            receiver.abandon(byId.get("2"));
            ServiceBusReceivedMessage again = receiveAll(receiver, 1, Duration.ofSeconds(5)).get(0);
            receiver.complete(again);
            ServiceBusReceivedMessage dead = receiveAll(deadLetters, 1, Duration.ofSeconds(5)).get(0);
            deadLetters.complete(dead);
            return map("received", byId.keySet().stream().sorted().collect(Collectors.toList()),
                "again", map("messageId", again.getMessageId(), "deliveryCount", again.getDeliveryCount()),
                "dead", map("messageId", dead.getMessageId(), "reason", dead.getDeadLetterReason()));
        }
    }

    private static Object management(ServiceBusClientBuilder builder, String queue) {
        try (ServiceBusSenderClient sender = builder.sender().queueName(queue).buildClient();
             ServiceBusReceiverClient receiver = builder.receiver().queueName(queue)
                 .maxAutoLockRenewDuration(Duration.ZERO).buildClient()) {
            long scheduled = sender.scheduleMessage(new ServiceBusMessage("later"), OffsetDateTime.now().plusHours(1));
            sender.cancelScheduledMessage(scheduled);
            sender.sendMessage(new ServiceBusMessage("peeked"));
            List<String> peeked = bodies(receiver.peekMessages(10));
            ServiceBusReceivedMessage message = receiveAll(receiver, 1, Duration.ofSeconds(5)).get(0);
            OffsetDateTime before = message.getLockedUntil();
            Harness.sleep(50);
            boolean renewed = receiver.renewMessageLock(message).isAfter(before);
            receiver.complete(message);
            return map("peeked", peeked, "renewed", renewed, "left", bodies(receiver.peekMessages(10)).size());
        }
    }

    private static Object session(ServiceBusClientBuilder builder, String queue) {
        try (ServiceBusSenderClient sender = builder.sender().queueName(queue).buildClient();
             ServiceBusSessionReceiverClient sessions = builder.sessionReceiver().queueName(queue).buildClient()) {
            sender.sendMessages(List.of(new ServiceBusMessage("0").setSessionId("java"),
                new ServiceBusMessage("1").setSessionId("java")));
            ServiceBusReceiverClient receiver = sessions.acceptSession("java");
            receiver.setSessionState("halfway".getBytes(StandardCharsets.UTF_8));
            String state = new String(receiver.getSessionState(), StandardCharsets.UTF_8);
            List<ServiceBusReceivedMessage> got = receiveAll(receiver, 2, Duration.ofSeconds(5));
            got.forEach(receiver::complete);
            receiver.close();
            return map("state", state, "bodies", bodies(got));
        }
    }
}
