package sbfed.compat;

import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Received messages as the plain fields the tests compare, and receiving until a count arrived. */
final class Messages {
    private Messages() {
    }

    static Map<String, Object> received(ServiceBusReceivedMessage message) {
        boolean locked = message.getLockToken() != null;
        return Harness.map(
            "body", message.getBody().toString(),
            "messageId", message.getMessageId(),
            "subject", message.getSubject(),
            "correlationId", message.getCorrelationId(),
            "contentType", message.getContentType(),
            "to", message.getTo(),
            "replyTo", message.getReplyTo(),
            "sessionId", message.getSessionId(),
            "partitionKey", message.getPartitionKey(),
            "timeToLive", message.getTimeToLive() == null ? null : message.getTimeToLive().toMillis(),
            "applicationProperties", message.getApplicationProperties(),
            "sequenceNumber", message.getSequenceNumber(),
            "enqueuedSequenceNumber", message.getEnqueuedSequenceNumber(),
            "deliveryCount", message.getDeliveryCount(),
            "state", message.getState().toString(),
            "lockToken", message.getLockToken(),
            "lockedUntil", locked ? message.getLockedUntil() : null,
            "enqueuedTime", message.getEnqueuedTime(),
            "scheduledEnqueueTime", message.getScheduledEnqueueTime(),
            "deadLetterReason", message.getDeadLetterReason(),
            "deadLetterErrorDescription", message.getDeadLetterErrorDescription(),
            "deadLetterSource", message.getDeadLetterSource());
    }

    static List<Map<String, Object>> received(Iterable<ServiceBusReceivedMessage> messages) {
        List<Map<String, Object>> result = new ArrayList<>();
        messages.forEach(message -> result.add(received(message)));
        return result;
    }

    static List<String> bodies(Iterable<ServiceBusReceivedMessage> messages) {
        List<String> result = new ArrayList<>();
        messages.forEach(message -> result.add(message.getBody().toString()));
        return result;
    }

    /** Receives until `count` messages arrived or a wait of `maxWait` brought none. */
    static List<ServiceBusReceivedMessage> receiveAll(ServiceBusReceiverClient receiver, int count, Duration maxWait) {
        List<ServiceBusReceivedMessage> all = new ArrayList<>();
        while (all.size() < count) {
            int before = all.size();
            receiver.receiveMessages(count - all.size(), maxWait).forEach(all::add);
            if (all.size() == before) {
                break;
            }
        }
        return all;
    }

    static List<ServiceBusReceivedMessage> receiveAll(ServiceBusReceiverClient receiver, int count) {
        return receiveAll(receiver, count, Duration.ofSeconds(10));
    }
}
