package sbfed.compat;

import static sbfed.compat.Harness.map;
import static sbfed.compat.Messages.receiveAll;
import static sbfed.compat.Messages.received;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusRuleManagerClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.models.CorrelationRuleFilter;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.EmptyRuleAction;
import com.azure.messaging.servicebus.administration.models.FalseRuleFilter;
import com.azure.messaging.servicebus.administration.models.RuleProperties;
import com.azure.messaging.servicebus.administration.models.SqlRuleAction;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import com.azure.messaging.servicebus.administration.models.TrueRuleFilter;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Topics with the Java SDK: SQL and correlation filters with actions, autoforwarding, and rules made, listed and
 * deleted through ServiceBusRuleManagerClient (AMQP management on the subscription) and then routing.
 */
final class Topics {
    private final ServiceBusClientBuilder builder = Harness.builder();

    private Topics() {
    }

    static Object run(String[] args) {
        Topics scenario = new Topics();
        return map("filters", scenario.filtersAndActions(), "chain", scenario.autoforwardChain());
    }

    /** A run of its own: the rule manager needs the broker's AMQP rule operations. */
    static Object rules(String[] args) {
        return new Topics().ruleManager();
    }

    private static ServiceBusMessage order(String body, String id, String subject, String color, int quantity) {
        ServiceBusMessage message = new ServiceBusMessage(body).setMessageId(id).setSubject(subject);
        message.getApplicationProperties().putAll(Map.of("color", color, "quantity", quantity));
        return message;
    }

    /** What reached an entity: `expected` messages, then a short look for any more. */
    private List<Map<String, Object>> drain(int expected, String queueOrTopic, String subscription) {
        ServiceBusClientBuilder.ServiceBusReceiverClientBuilder receivers = builder.receiver()
            .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE);
        if (subscription == null) {
            receivers.queueName(queueOrTopic);
        } else {
            receivers.topicName(queueOrTopic).subscriptionName(subscription);
        }
        try (ServiceBusReceiverClient receiver = receivers.buildClient()) {
            List<ServiceBusReceivedMessage> messages = receiveAll(receiver, expected);
            messages.addAll(receiveAll(receiver, 10, Duration.ofMillis(300)));
            return received(messages);
        }
    }

    private Object filtersAndActions() {
        try (ServiceBusSenderClient sender = builder.sender().topicName("orders").buildClient()) {
            sender.sendMessages(List.of(order("red-big", "o1", "order", "red", 12),
                order("red-small", "o2", "order", "red", 1), order("blue", "o3", "refund", "blue", 50)));
        }
        return map("all", drain(3, "orders", "all"), "red", drain(2, "orders", "red"),
            "big", drain(1, "orders", "big"), "refundsForwarded", drain(1, "refunds", null));
    }

    private Object autoforwardChain() {
        try (ServiceBusSenderClient sender = builder.sender().queueName("chain-start").buildClient()) {
            sender.sendMessages(List.of(new ServiceBusMessage("hop-1").setMessageId("h1"),
                new ServiceBusMessage("hop-2").setMessageId("h2")));
        }
        return map("end", drain(2, "chain-end", null));
    }

    private static Map<String, Object> rule(RuleProperties rule) {
        Map<String, Object> filter;
        if (rule.getFilter() instanceof CorrelationRuleFilter correlation) {
            filter = map("correlationId", correlation.getCorrelationId(), "messageId", correlation.getMessageId(),
                "to", correlation.getTo(), "replyTo", correlation.getReplyTo(), "subject", correlation.getLabel(),
                "sessionId", correlation.getSessionId(), "replyToSessionId", correlation.getReplyToSessionId(),
                "contentType", correlation.getContentType(), "properties", correlation.getProperties());
        } else if (rule.getFilter() instanceof SqlRuleFilter sql) {
            filter = map("sqlExpression", sql.getSqlExpression(), "parameters", sql.getParameters());
        } else {
            filter = map("other", String.valueOf(rule.getFilter()));
        }
        filter.put("kind", rule.getFilter().getClass().getSimpleName());
        Object action = rule.getAction() instanceof SqlRuleAction sql
            ? map("sqlExpression", sql.getSqlExpression(), "parameters", sql.getParameters())
            : rule.getAction() instanceof EmptyRuleAction || rule.getAction() == null ? null
            : rule.getAction().getClass().getSimpleName();
        return map("name", rule.getName(), "filter", filter, "action", action);
    }

    private static List<Map<String, Object>> rules(ServiceBusRuleManagerClient manager) {
        List<Map<String, Object>> listed = new ArrayList<>();
        manager.listRules().forEach(rule -> listed.add(rule(rule)));
        return listed;
    }

    /** Rules through the SDK's rule manager on subscription "managed", then what each routes. */
    private Object ruleManager() {
        try (ServiceBusRuleManagerClient manager = builder.ruleManager().topicName("orders")
            .subscriptionName("managed").buildClient()) {
            List<Map<String, Object>> initial = rules(manager);
            manager.deleteRule("$Default");
            // The rule manager sends a SQL filter's and action's expression only (not their parameters).
            manager.createRule("priced", new CreateRuleOptions(new SqlRuleFilter("quantity > 10 AND color = 'red'"))
                .setAction(new SqlRuleAction("SET flagged = TRUE; SET sys.Label = 'big-red'")));
            CorrelationRuleFilter matched = new CorrelationRuleFilter().setCorrelationId("cid").setMessageId("mid")
                .setTo("to").setReplyTo("rt").setLabel("lbl").setSessionId("sess").setReplyToSessionId("rts")
                .setContentType("application/json");
            matched.getProperties().putAll(Map.of("k", "v", "n", 5, "on", true));
            manager.createRule("matched", new CreateRuleOptions(matched));
            manager.createRule("refunds", new CreateRuleOptions(new CorrelationRuleFilter().setLabel("refund")));
            manager.createRule("everything", new CreateRuleOptions(new TrueRuleFilter()));
            manager.createRule("nothing", new CreateRuleOptions(new FalseRuleFilter()));
            Map<String, Object> again = Harness.outcome(() -> {
                manager.createRule("priced", new CreateRuleOptions(new SqlRuleFilter("1=1")));
                return null;
            });
            Map<String, Object> badSql = Harness.outcome(() -> {
                manager.createRule("broken", new CreateRuleOptions(new SqlRuleFilter("a = = 1")));
                return null;
            });
            List<Map<String, Object>> listed = rules(manager);
            manager.deleteRule("everything");
            Map<String, Object> missing = Harness.outcome(() -> {
                manager.deleteRule("missing");
                return null;
            });
            List<Map<String, Object>> afterDelete = rules(manager);
            try (ServiceBusSenderClient sender = builder.sender().topicName("orders").buildClient()) {
                sender.sendMessages(List.of(order("managed-big", "m1", "order", "red", 20),
                    order("managed-small", "m2", "order", "red", 2), order("managed-refund", "m3", "refund", "blue",
                    1)));
            }
            return map("initial", initial, "again", again, "badSql", badSql, "listed", listed,
                "missing", missing, "afterDelete", afterDelete, "routed", drain(2, "orders", "managed"));
        }
    }
}
