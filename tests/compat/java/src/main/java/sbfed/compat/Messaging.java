package sbfed.compat;

import static sbfed.compat.Harness.map;
import static sbfed.compat.Messages.bodies;
import static sbfed.compat.Messages.receiveAll;
import static sbfed.compat.Messages.received;

import com.azure.core.util.BinaryData;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusMessageBatch;
import com.azure.messaging.servicebus.ServiceBusProcessorClient;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.AbandonOptions;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import com.azure.messaging.servicebus.models.SubQueue;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/** Sending, receiving and settling with the Java SDK: one run, many checks (see test_java_messaging.py). */
final class Messaging {
    private final ServiceBusClientBuilder builder = Harness.builder();

    private Messaging() {
    }

    static Object run(String[] args) {
        Messaging scenario = new Messaging();
        scenario.sendExpiring();
        return map(
            "sendAndReceive", scenario.sendAndReceive(),
            "batch", scenario.batchOfHundred(),
            "settle", scenario.settleEveryWay(),
            "peek", scenario.receiveAndDeleteAndPeek(),
            "schedule", scenario.scheduleAndCancel(),
            "processor", scenario.processor(),
            "dedup", scenario.duplicateDetection(),
            "partitioned", scenario.partitioned(),
            "interop", scenario.interop(),
            "expired", scenario.expired());
    }

    private ServiceBusSenderClient sender(String queue) {
        return builder.sender().queueName(queue).buildClient();
    }

    private ServiceBusReceiverClient receiver(String queue) {
        return builder.receiver().queueName(queue).buildClient();
    }

    private ServiceBusReceiverClient receiveAndDelete(String queue, SubQueue subQueue) {
        return builder.receiver().queueName(queue).subQueue(subQueue)
            .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient();
    }

    private static ServiceBusMessage message(String body, String messageId) {
        return new ServiceBusMessage(body).setMessageId(messageId);
    }

    private Object sendAndReceive() {
        try (ServiceBusSenderClient sender = sender("basic")) {
            ServiceBusMessage full = new ServiceBusMessage(BinaryData.fromString("{\"hello\":\"world\"}"))
                .setMessageId("m-full").setSubject("subj").setCorrelationId("c1").setContentType("application/json")
                .setTo("dest").setReplyTo("back").setTimeToLive(Duration.ofMinutes(5));
            full.getApplicationProperties().putAll(Map.of("k", "v", "n", 7, "flag", true, "big", 1L << 40,
                "ratio", 0.5));
            sender.sendMessage(full);
            sender.sendMessage(new ServiceBusMessage("no id"));  // Service Bus assigns the id
            sender.sendMessages(List.of(message("list-0", "l0"), message("list-1", "l1")));
        }
        try (ServiceBusReceiverClient receiver = receiver("basic")) {
            List<ServiceBusReceivedMessage> messages = receiveAll(receiver, 4);
            messages.forEach(receiver::complete);
            int leftover = receiveAll(receiver, 1, Duration.ofMillis(500)).size();
            return map("messages", received(messages), "leftover", leftover);
        }
    }

    private Object batchOfHundred() {
        try (ServiceBusSenderClient sender = sender("batch")) {
            ServiceBusMessageBatch batch = sender.createMessageBatch();
            for (int i = 0; i < 100; i++) {
                ServiceBusMessage message = message("b" + i, "b" + i);
                message.getApplicationProperties().put("i", i);
                if (!batch.tryAddMessage(message)) {
                    throw new IllegalStateException("message " + i + " did not fit a batch of "
                        + batch.getMaxSizeInBytes() + " bytes");
                }
            }
            sender.sendMessages(batch);
            ServiceBusMessageBatch anonymous = sender.createMessageBatch();
            IntStream.range(0, 3).forEach(i -> anonymous.tryAddMessage(new ServiceBusMessage("a" + i)));
            sender.sendMessages(anonymous);
            try (ServiceBusReceiverClient receiver = receiveAndDelete("batch", SubQueue.NONE)) {
                List<ServiceBusReceivedMessage> messages = receiveAll(receiver, 103);
                return map(
                    "maxSizeInBytes", batch.getMaxSizeInBytes(), "count", batch.getCount(),
                    "bodies", bodies(messages),
                    "ids", messages.stream().map(ServiceBusReceivedMessage::getMessageId).collect(Collectors.toList()),
                    "properties", messages.stream().limit(100)
                        .map(m -> m.getApplicationProperties().get("i")).collect(Collectors.toList()),
                    "lockTokens", messages.stream().map(m -> String.valueOf(m.getLockToken()))
                        .collect(Collectors.toList()));
            }
        }
    }

    private Object settleEveryWay() {
        try (ServiceBusSenderClient sender = sender("settle")) {
            sender.sendMessages(List.of("complete", "abandon", "defer", "deadletter").stream()
                .map(body -> message(body, body)).collect(Collectors.toList()));
        }
        try (ServiceBusReceiverClient receiver = receiver("settle")) {
            Map<String, ServiceBusReceivedMessage> byBody = receiveAll(receiver, 4).stream()
                .collect(Collectors.toMap(m -> m.getBody().toString(), m -> m));
            receiver.complete(byBody.get("complete"));
            receiver.abandon(byBody.get("abandon"),
                new AbandonOptions().setPropertiesToModify(Map.of("abandonedBy", "java", "attempt", 1)));
            receiver.defer(byBody.get("defer"));
            receiver.deadLetter(byBody.get("deadletter"), new DeadLetterOptions().setDeadLetterReason("bad-order")
                .setDeadLetterErrorDescription("total < 0"));
            ServiceBusReceivedMessage again = receiveAll(receiver, 1).get(0);  // the abandoned one, a second time
            ServiceBusReceivedMessage deferred = receiver.receiveDeferredMessage(
                byBody.get("defer").getSequenceNumber());
            Map<String, Object> deferredSeen = received(deferred);
            receiver.complete(deferred);
            receiver.abandon(again);  // max delivery count 2: the broker dead-letters it
            int rest = receiveAll(receiver, 1, Duration.ofSeconds(1)).size();
            try (ServiceBusReceiverClient deadLetters = builder.receiver().queueName("settle")
                .subQueue(SubQueue.DEAD_LETTER_QUEUE).buildClient()) {
                List<ServiceBusReceivedMessage> dead = receiveAll(deadLetters, 2);
                dead.forEach(deadLetters::complete);
                return map("abandonedAgain", received(again), "deferred", deferredSeen, "afterSettling", rest,
                    "deadLettered", received(dead));
            }
        }
    }

    private Object receiveAndDeleteAndPeek() {
        try (ServiceBusSenderClient sender = sender("peek")) {
            sender.sendMessages(IntStream.range(0, 5).mapToObj(i -> message("p" + i, "p" + i))
                .collect(Collectors.toList()));
        }
        try (ServiceBusReceiverClient receiver = receiveAndDelete("peek", SubQueue.NONE)) {
            List<ServiceBusReceivedMessage> firstPeek = new ArrayList<>();
            receiver.peekMessages(3).forEach(firstPeek::add);
            List<String> nextPeek = bodies(receiver.peekMessages(10));  // from where the last peek stopped
            List<String> fromStart = bodies(receiver.peekMessages(2, firstPeek.get(0).getSequenceNumber()));
            ServiceBusReceivedMessage single = receiver.peekMessage(firstPeek.get(1).getSequenceNumber());
            List<ServiceBusReceivedMessage> taken = receiveAll(receiver, 5);
            List<String> emptyPeek = bodies(receiver.peekMessages(5));
            return map("firstPeek", received(firstPeek), "nextPeek", nextPeek, "fromStart", fromStart,
                "single", single.getBody().toString(), "taken", received(taken), "emptyPeek", emptyPeek,
                "afterEmpty", receiver.peekMessage() == null);
        }
    }

    private Object scheduleAndCancel() {
        OffsetDateTime soon = OffsetDateTime.now().plusNanos(1_500_000_000L);
        try (ServiceBusSenderClient sender = sender("schedule");
             ServiceBusReceiverClient receiver = receiver("schedule")) {
            long kept = sender.scheduleMessage(message("kept", "kept"), soon);
            long cancelled = sender.scheduleMessage(message("cancelled", "cancelled"), soon);
            sender.cancelScheduledMessage(cancelled);
            List<ServiceBusReceivedMessage> peeked = new ArrayList<>();
            receiver.peekMessages(10).forEach(peeked::add);
            List<ServiceBusReceivedMessage> messages = receiveAll(receiver, 1, Duration.ofSeconds(4));
            messages.addAll(receiveAll(receiver, 1, Duration.ofMillis(500)));
            messages.forEach(receiver::complete);
            return map("sequenceNumbers", List.of(kept, cancelled), "peeked", received(peeked),
                "received", received(messages), "scheduledFor", soon);
        }
    }

    /** The processor client: every message handled and completed for the handler. */
    private Object processor() {
        try (ServiceBusSenderClient sender = sender("subscribe")) {
            sender.sendMessages(IntStream.range(0, 6).mapToObj(i -> i % 2 == 1 ? new ServiceBusMessage("s" + i)
                : message("s" + i, "s" + i)).collect(Collectors.toList()));
        }
        List<String> seen = Collections.synchronizedList(new ArrayList<>());
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch all = new CountDownLatch(6);
        ServiceBusProcessorClient processor = builder.processor().queueName("subscribe").maxConcurrentCalls(2)
            .processMessage(context -> {
                seen.add(context.getMessage().getBody().toString());
                all.countDown();
            })
            .processError(context -> errors.add(String.valueOf(context.getException())))
            .buildProcessorClient();
        processor.start();
        boolean done;
        try {
            done = all.await(15, TimeUnit.SECONDS);
        } catch (InterruptedException error) {
            throw new IllegalStateException(error);
        }
        Harness.sleep(500);  // the last completion goes out after the handler returns
        processor.close();
        try (ServiceBusReceiverClient check = receiver("subscribe")) {
            int left = receiveAll(check, 10, Duration.ofSeconds(1)).size();
            List<String> sorted = new ArrayList<>(seen);
            Collections.sort(sorted);
            return map("done", done, "bodies", sorted, "errors", errors, "leftAfterAutoComplete", left);
        }
    }

    private Object duplicateDetection() {
        try (ServiceBusSenderClient sender = sender("dedup")) {
            sender.sendMessage(message("first", "same"));
            sender.sendMessage(message("second", "same"));
            sender.sendMessage(message("other", "other"));
        }
        try (ServiceBusReceiverClient receiver = receiveAndDelete("dedup", SubQueue.NONE)) {
            return bodies(receiveAll(receiver, 3, Duration.ofMillis(1500)));
        }
    }

    private Object partitioned() {
        Map<String, Object> mismatch;
        try (ServiceBusSenderClient sender = sender("partitioned")) {
            ServiceBusMessageBatch batch = sender.createMessageBatch(
                new com.azure.messaging.servicebus.models.CreateMessageBatchOptions());
            IntStream.range(0, 5).forEach(i -> batch.tryAddMessage(new ServiceBusMessage("k" + i)
                .setPartitionKey("pk-1")));
            sender.sendMessages(batch);
            sender.sendMessage(new ServiceBusMessage("other-key").setPartitionKey("pk-2"));
            mismatch = Harness.outcome(() -> new ServiceBusMessage("x").setSessionId("b").setPartitionKey("a"));
        }
        try (ServiceBusReceiverClient receiver = receiver("partitioned")) {
            List<ServiceBusReceivedMessage> messages = receiveAll(receiver, 6);
            messages.forEach(receiver::complete);
            return map("messages", received(messages), "mismatch", mismatch);
        }
    }

    /** Messages the Python SDK sent (test_java_messaging.py), and messages for it to receive. */
    private Object interop() {
        List<ServiceBusReceivedMessage> messages;
        try (ServiceBusReceiverClient receiver = receiver("from-python")) {
            messages = receiveAll(receiver, 2);
            messages.forEach(receiver::complete);
        }
        try (ServiceBusSenderClient sender = sender("from-java")) {
            ServiceBusMessage text = message("from java", "java-1").setSubject("interop").setCorrelationId("corr")
                .setContentType("text/plain").setTimeToLive(Duration.ofSeconds(60));
            text.getApplicationProperties().putAll(Map.of("text", "v", "number", 42, "yes", true));
            sender.sendMessage(text);
            ServiceBusMessageBatch batch = sender.createMessageBatch();
            batch.tryAddMessage(new ServiceBusMessage(new byte[] {0, 1, 2, (byte) 255}).setMessageId("java-2"));
            sender.sendMessages(batch);
        }
        List<Object> seen = new ArrayList<>();
        for (ServiceBusReceivedMessage message : messages) {
            Map<String, Object> fields = received(message);
            fields.put("body", message.getBody().toBytes());
            seen.add(fields);
        }
        return seen;
    }

    /** A message that outlives its time to live: dead-lettered by the broker (checked at the end of the run). */
    private void sendExpiring() {
        try (ServiceBusSenderClient sender = sender("expiring")) {
            sender.sendMessage(message("short-lived", "ttl").setTimeToLive(Duration.ofSeconds(1)));
        }
    }

    private Object expired() {
        try (ServiceBusReceiverClient deadLetters = receiveAndDelete("expiring", SubQueue.DEAD_LETTER_QUEUE)) {
            return received(receiveAll(deadLetters, 1, Duration.ofSeconds(5)));
        }
    }
}
