package sbfed.compat;

import static sbfed.compat.Harness.map;
import static sbfed.compat.Messages.bodies;
import static sbfed.compat.Messages.receiveAll;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/** Sessions with the Java SDK: state, lock renewal, next available, a session another receiver holds. */
final class Sessions {
    private final ServiceBusClientBuilder builder =
        Harness.builder(Harness.connectionString(), 0, Duration.ofSeconds(10));

    private Sessions() {
    }

    static Object run(String[] args) {
        Sessions scenario = new Sessions();
        return map("named", scenario.namedSessionWithState(), "next", scenario.nextAvailable());
    }

    private ServiceBusSessionReceiverClient sessions(ServiceBusClientBuilder clients, String queue) {
        return clients.sessionReceiver().queueName(queue).disableAutoComplete().buildClient();
    }

    private static String text(byte[] state) {
        return state == null ? null : new String(state, StandardCharsets.UTF_8);
    }

    private Object namedSessionWithState() {
        Map<String, Object> refused;
        try (ServiceBusSenderClient sender = builder.sender().queueName("sessions").buildClient()) {
            sender.sendMessages(List.of("a1", "a2", "a3").stream()
                .map(body -> new ServiceBusMessage(body).setSessionId("A")).collect(Collectors.toList()));
            sender.sendMessage(new ServiceBusMessage("b1").setSessionId("B"));
            refused = Harness.outcome(() -> {
                sender.sendMessage(new ServiceBusMessage("no session"));
                return null;
            });
        }
        try (ServiceBusSessionReceiverClient sessions = sessions(builder, "sessions");
             ServiceBusSessionReceiverClient others = sessions(
                 Harness.builder(Harness.connectionString(), 0, Duration.ofSeconds(10)), "sessions")) {
            ServiceBusReceiverClient receiver = sessions.acceptSession("A");
            String initialState = text(receiver.getSessionState());
            receiver.setSessionState("{\"step\":2}".getBytes(StandardCharsets.UTF_8));
            String state = text(receiver.getSessionState());
            List<ServiceBusReceivedMessage> messages = receiveAll(receiver, 3);
            OffsetDateTime renewedAt = OffsetDateTime.now();
            OffsetDateTime renewedUntil = receiver.renewSessionLock();
            messages.forEach(receiver::complete);
            Map<String, Object> taken = Harness.timed(() -> others.acceptSession("A"));
            ServiceBusReceiverClient b = others.acceptSession("B");
            List<String> peekedB = bodies(b.peekMessages(5));
            b.close();
            receiver.setSessionState(null);
            receiver.close();
            ServiceBusReceiverClient again = sessions.acceptSession("A");
            String clearedState = text(again.getSessionState());
            again.close();
            return map("sessionId", receiver.getSessionId(), "renewedAt", renewedAt,
                "renewedUntil", renewedUntil, "initialState", initialState, "state", state,
                "clearedState", clearedState, "bodies", bodies(messages),
                "sessionIds", messages.stream().map(ServiceBusReceivedMessage::getSessionId)
                    .collect(Collectors.toList()),
                "refused", refused, "taken", taken, "sessions", Map.of("B", peekedB));
        }
    }

    private Object nextAvailable() {
        try (ServiceBusSenderClient sender = builder.sender().queueName("sessions-next").buildClient()) {
            sender.sendMessages(List.of(new ServiceBusMessage("x1").setSessionId("X"),
                new ServiceBusMessage("y1").setSessionId("Y"), new ServiceBusMessage("x2").setSessionId("X")));
        }
        Map<String, Object> got = new LinkedHashMap<>();
        try (ServiceBusSessionReceiverClient sessions = sessions(builder, "sessions-next")) {
            ServiceBusReceiverClient first = sessions.acceptNextSession();
            ServiceBusReceiverClient second = sessions.acceptNextSession();
            for (ServiceBusReceiverClient receiver : List.of(first, second)) {
                List<ServiceBusReceivedMessage> messages = receiveAll(receiver, 2, Duration.ofSeconds(1));
                messages.forEach(receiver::complete);
                got.put(receiver.getSessionId(), bodies(messages));
            }
            // No session left: the broker answers when the client's try timeout (2 s here) runs out.
            ServiceBusClientBuilder impatient = Harness.builder(Harness.connectionString(), 0, Duration.ofSeconds(2));
            Map<String, Object> none;
            try (ServiceBusSessionReceiverClient empty = sessions(impatient, "sessions-next")) {
                none = Harness.timed(empty::acceptNextSession);
            }
            first.close();
            second.close();
            return map("got", got, "none", none);
        }
    }
}
