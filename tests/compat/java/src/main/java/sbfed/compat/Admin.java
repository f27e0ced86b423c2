package sbfed.compat;

import static sbfed.compat.Harness.map;
import static sbfed.compat.Harness.outcome;

import com.azure.core.http.HttpPipelineCallContext;
import com.azure.core.http.HttpPipelineNextPolicy;
import com.azure.core.http.HttpResponse;
import com.azure.core.http.policy.FixedDelayOptions;
import com.azure.core.http.policy.HttpPipelinePolicy;
import com.azure.core.http.rest.PagedResponse;
import com.azure.core.util.UrlBuilder;
import com.azure.core.http.policy.RetryOptions;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClientBuilder;
import com.azure.messaging.servicebus.administration.models.CorrelationRuleFilter;
import com.azure.messaging.servicebus.administration.models.CreateQueueOptions;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.CreateSubscriptionOptions;
import com.azure.messaging.servicebus.administration.models.CreateTopicOptions;
import com.azure.messaging.servicebus.administration.models.EntityStatus;
import com.azure.messaging.servicebus.administration.models.QueueProperties;
import com.azure.messaging.servicebus.administration.models.RuleProperties;
import com.azure.messaging.servicebus.administration.models.SqlRuleAction;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import com.azure.messaging.servicebus.administration.models.SubscriptionProperties;
import com.azure.messaging.servicebus.administration.models.TopicProperties;
import java.net.URI;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import reactor.core.publisher.Mono;

/**
 * ServiceBusAdministrationClient on the namespace's management port: queues, topics, subscriptions and rules
 * created, read, updated, listed (past one page) and deleted, runtime figures, and the errors it names.
 */
final class Admin {
    private final ServiceBusAdministrationClient admin = client(Harness.adminConnectionString());

    private Admin() {
    }

    static Object run(String[] args) {
        Admin scenario = new Admin();
        return map("queues", scenario.queues(args[0]), "topics", scenario.topics(args[1], args[2]),
            "rules", scenario.rules(args[3], args[4]), "paging", scenario.paging());
    }

    /**
     * The client for a connection string, no retries. The client keeps only the endpoint's host (Service Bus
     * answers on 443); a policy puts the connection string's port back into every request's URL.
     */
    static ServiceBusAdministrationClient client(String connectionString) {
        int port = URI.create(connectionString.split(";")[0].split("=", 2)[1]).getPort();
        return new ServiceBusAdministrationClientBuilder().connectionString(connectionString)
            .addPolicy(new EndpointPort(port))
            .retryOptions(new RetryOptions(new FixedDelayOptions(0, Duration.ofMillis(100))))
            .buildClient();
    }

    /** Sends each request to `port` (the broker's management port) on the endpoint's host. */
    private record EndpointPort(int port) implements HttpPipelinePolicy {
        @Override
        public Mono<HttpResponse> process(HttpPipelineCallContext context, HttpPipelineNextPolicy next) {
            if (port > 0) {
                context.getHttpRequest().setUrl(UrlBuilder.parse(context.getHttpRequest().getUrl()).setPort(port)
                    .toString());
            }
            return next.process();
        }
    }

    private static <T> List<Object> all(Iterable<T> items, Function<T, Object> field) {
        List<Object> result = new ArrayList<>();
        items.forEach(item -> result.add(field.apply(item)));
        return result;
    }

    private Object queues(String busyQueue) {
        Map<String, Object> result = map("namespace", outcome(admin::getNamespaceProperties));
        result.put("createdArchive", outcome(() -> admin.createQueue("archive")));
        CreateQueueOptions options = new CreateQueueOptions().setLockDuration(Duration.ofSeconds(45))
            .setMaxSizeInMegabytes(2048).setDuplicateDetectionRequired(true).setSessionRequired(false)
            .setDefaultMessageTimeToLive(Duration.ofDays(1)).setDeadLetteringOnMessageExpiration(true)
            .setDuplicateDetectionHistoryTimeWindow(Duration.ofMinutes(5)).setMaxDeliveryCount(4)
            .setBatchedOperationsEnabled(false).setUserMetadata("owner=billing")
            .setAutoDeleteOnIdle(Duration.ofHours(2)).setPartitioningEnabled(true).setForwardTo("archive")
            .setForwardDeadLetteredMessagesTo("archive");
        result.put("created", outcome(() -> admin.createQueue("orders", options)));
        result.put("createdAgain", outcome(() -> admin.createQueue("orders")));
        result.put("fetched", outcome(() -> admin.getQueue("orders")));
        result.put("exists", map("orders", admin.getQueueExists("orders"),
            "missing", admin.getQueueExists("missing")));
        QueueProperties queue = admin.getQueue("orders");
        // The service names forwarding destinations by URL (sb://host/archive), a URL the client cannot parse
        // when it sends the queue back: a Java user names the destination again.
        queue.setMaxDeliveryCount(7).setUserMetadata("owner=payments").setStatus(EntityStatus.SEND_DISABLED)
            .setForwardTo(null).setForwardDeadLetteredMessagesTo("archive");
        result.put("updated", outcome(() -> admin.updateQueue(queue)));
        result.put("refetched", outcome(() -> admin.getQueue("orders")));
        result.put("runtime", outcome(() -> admin.getQueueRuntimeProperties(busyQueue)));
        result.put("listed", all(admin.listQueues(), QueueProperties::getName));
        result.put("missing", map(
            "get", outcome(() -> admin.getQueue("missing")),
            "runtime", outcome(() -> admin.getQueueRuntimeProperties("missing")),
            "update", outcome(() -> admin.updateQueue(deletedQueue())),
            "delete", outcome(() -> {
                admin.deleteQueue("missing");
                return null;
            })));
        result.put("deleted", outcome(() -> {
            admin.deleteQueue("orders");
            return null;
        }));
        result.put("afterDelete", outcome(() -> admin.getQueue("orders")));
        String wrongKey = Harness.withKey(Harness.adminConnectionString(), "bm90LXRoZS1rZXk=");
        result.put("wrongKey", outcome(() -> client(wrongKey).getQueue("archive")));
        return result;
    }

    /** The model of a queue deleted since (the model has no public constructor): its update is a 404. */
    private QueueProperties deletedQueue() {
        QueueProperties ghost = admin.createQueue("ghost");
        admin.deleteQueue("ghost");
        return ghost;
    }

    private Object topics(String busyTopic, String busySubscription) {
        Map<String, Object> result = map();
        admin.createQueue("sink");
        CreateTopicOptions topicOptions = new CreateTopicOptions().setMaxSizeInMegabytes(2048)
            .setDuplicateDetectionRequired(true).setDefaultMessageTimeToLive(Duration.ofHours(10))
            .setDuplicateDetectionHistoryTimeWindow(Duration.ofMinutes(1)).setBatchedOperationsEnabled(false)
            .setOrderingSupported(false).setPartitioningEnabled(true).setAutoDeleteOnIdle(Duration.ofHours(3))
            .setUserMetadata("team=events");
        result.put("topic", outcome(() -> admin.createTopic("events", topicOptions)));
        result.put("topicAgain", outcome(() -> admin.createTopic("events")));
        result.put("topicFetched", outcome(() -> admin.getTopic("events")));
        result.put("topicExists", map("events", admin.getTopicExists("events"),
            "missing", admin.getTopicExists("missing")));
        TopicProperties topic = admin.getTopic("events");
        topic.setUserMetadata("team=payments").setStatus(EntityStatus.SEND_DISABLED);
        result.put("topicUpdated", outcome(() -> admin.updateTopic(topic)));

        CreateSubscriptionOptions options = new CreateSubscriptionOptions().setLockDuration(Duration.ofSeconds(20))
            .setSessionRequired(true).setDefaultMessageTimeToLive(Duration.ofHours(1))
            .setDeadLetteringOnMessageExpiration(true).setEnableDeadLetteringOnFilterEvaluationExceptions(false)
            .setMaxDeliveryCount(2).setBatchedOperationsEnabled(false).setUserMetadata("to=secondary")
            .setAutoDeleteOnIdle(Duration.ofHours(4)).setForwardDeadLetteredMessagesTo("sink");
        result.put("subscription", outcome(() -> admin.createSubscription("events", "audit", options)));
        result.put("subscriptionAgain", outcome(() -> admin.createSubscription("events", "audit")));
        result.put("forwarding", outcome(() -> admin.createSubscription("events", "relay", "orders-only",
            new CreateSubscriptionOptions().setForwardTo("sink"),
            new CreateRuleOptions(new SqlRuleFilter("kind = 'order'")))));
        result.put("relayRules", all(admin.listRules("events", "relay"), RuleProperties::getName));
        result.put("subscriptionFetched", outcome(() -> admin.getSubscription("events", "audit")));
        result.put("subscriptionExists", map("audit", admin.getSubscriptionExists("events", "audit"),
            "missing", admin.getSubscriptionExists("events", "missing")));
        SubscriptionProperties subscription = admin.getSubscription("events", "audit");
        subscription.setMaxDeliveryCount(9).setStatus(EntityStatus.RECEIVE_DISABLED)
            .setForwardDeadLetteredMessagesTo(null);
        result.put("subscriptionUpdated", outcome(() -> admin.updateSubscription(subscription)));
        result.put("subscriptionRefetched", outcome(() -> admin.getSubscription("events", "audit")));

        result.put("topicRuntime", outcome(() -> admin.getTopicRuntimeProperties(busyTopic)));
        result.put("subscriptionRuntime", outcome(() ->
            admin.getSubscriptionRuntimeProperties(busyTopic, busySubscription)));
        result.put("topics", all(admin.listTopics(), TopicProperties::getName));
        result.put("subscriptions", all(admin.listSubscriptions("events"),
            s -> List.of(s.getTopicName(), s.getSubscriptionName())));
        result.put("missing", map(
            "topic", outcome(() -> admin.getTopic("missing")),
            "subscription", outcome(() -> admin.getSubscription("events", "missing")),
            "subscriptionOfMissingTopic", outcome(() -> admin.getSubscription("missing", "audit")),
            "deleteSubscription", outcome(() -> {
                admin.deleteSubscription("events", "missing");
                return null;
            })));
        result.put("subscriptionDeleted", outcome(() -> {
            admin.deleteSubscription("events", "audit");
            return null;
        }));
        result.put("afterSubscriptionDelete", outcome(() -> admin.getSubscription("events", "audit")));
        result.put("topicDeleted", outcome(() -> {
            admin.deleteTopic("events");
            return null;
        }));
        result.put("afterTopicDelete", outcome(() -> admin.getSubscription("events", "relay")));
        return result;
    }

    private Object rules(String topic, String subscription) {
        Map<String, Object> result = map();
        SqlRuleFilter priced = new SqlRuleFilter("price > @limit AND region = @region");
        priced.getParameters().putAll(Map.of("@limit", 10.5, "@region", "eu"));
        SqlRuleAction flag = new SqlRuleAction("SET flagged = @flag");
        flag.getParameters().put("@flag", true);
        result.put("sql", outcome(() -> admin.createRule(topic, "priced", subscription,
            new CreateRuleOptions(priced).setAction(flag))));
        CorrelationRuleFilter matched = new CorrelationRuleFilter().setCorrelationId("cid").setMessageId("mid")
            .setTo("to").setReplyTo("rt").setLabel("lbl").setSessionId("sess").setReplyToSessionId("rts")
            .setContentType("application/json");
        matched.getProperties().putAll(Map.of("k", "v", "n", 5, "on", true,
            "at", OffsetDateTime.of(2024, 1, 1, 0, 0, 0, 0, ZoneOffset.UTC)));
        result.put("correlation", outcome(() -> admin.createRule(topic, "matched", subscription,
            new CreateRuleOptions(matched))));
        result.put("again", outcome(() -> admin.createRule(topic, "priced", subscription,
            new CreateRuleOptions(new SqlRuleFilter("1=1")))));
        result.put("badSql", outcome(() -> admin.createRule(topic, "broken", subscription,
            new CreateRuleOptions(new SqlRuleFilter("a = = 1")))));
        result.put("fetched", outcome(() -> admin.getRule(topic, subscription, "priced")));
        RuleProperties rule = admin.getRule(topic, subscription, "priced");
        rule.setFilter(new SqlRuleFilter("price > 100")).setAction(null);
        result.put("updated", outcome(() -> admin.updateRule(topic, subscription, rule)));
        result.put("refetched", outcome(() -> admin.getRule(topic, subscription, "priced")));
        result.put("listed", all(admin.listRules(topic, subscription), r -> r));
        result.put("missing", map(
            "get", outcome(() -> admin.getRule(topic, subscription, "missing")),
            "delete", outcome(() -> {
                admin.deleteRule(topic, subscription, "missing");
                return null;
            }),
            "ofMissingSubscription", outcome(() -> admin.getRule(topic, "missing", "priced"))));
        result.put("deleted", outcome(() -> {
            admin.deleteRule(topic, subscription, "matched");
            return null;
        }));
        result.put("afterDelete", outcome(() -> admin.getRule(topic, subscription, "matched")));
        return result;
    }

    /** Lists longer than one page (the service's page is 100): every entity once, in order, page by page. */
    private Object paging() {
        for (int i = 0; i < 105; i++) {
            admin.createQueue(String.format("p%03d", i));
        }
        List<Integer> sizes = new ArrayList<>();
        List<Object> names = new ArrayList<>();
        for (PagedResponse<QueueProperties> page : admin.listQueues().iterableByPage()) {
            sizes.add(page.getValue().size());
            page.getValue().forEach(queue -> names.add(queue.getName()));
        }
        return map("pageSizes", sizes, "queues", names);
    }
}
