// Topics and subscriptions through the JS ServiceBusAdministrationClient: every property, update,
// exists, runtime counts (messages put there by the test), lists and the errors the client names.
import { run } from "./lib/harness.mjs";
import { adminClient, all, outcome } from "./lib/admin.mjs";

const topicOptions = {
  maxSizeInMegabytes: 2048,
  requiresDuplicateDetection: true,
  defaultMessageTimeToLive: "PT10H",
  duplicateDetectionHistoryTimeWindow: "PT1M",
  enableBatchedOperations: false,
  supportOrdering: false,
  enablePartitioning: true,
  autoDeleteOnIdle: "PT3H",
  userMetadata: "team=events",
};
const subscriptionOptions = {
  lockDuration: "PT20S",
  requiresSession: true,
  defaultMessageTimeToLive: "PT1H",
  deadLetteringOnMessageExpiration: true,
  deadLetteringOnFilterEvaluationExceptions: false,
  maxDeliveryCount: 2,
  enableBatchedOperations: false,
  userMetadata: "to=secondary",
  autoDeleteOnIdle: "PT4H",
  forwardDeadLetteredMessagesTo: "sink",
};

await run(async ([busyTopic, busySubscription]) => {
  const admin = adminClient();
  const result = {};
  await admin.createQueue("sink");
  result.topic = await outcome(() => admin.createTopic("events", topicOptions));
  result.topicAgain = await outcome(() => admin.createTopic("events"));
  result.topicFetched = await outcome(() => admin.getTopic("events"));
  result.topicExists = { events: await admin.topicExists("events"), missing: await admin.topicExists("missing") };
  const topic = await admin.getTopic("events");
  topic.userMetadata = "team=payments";
  topic.status = "SendDisabled";
  result.topicUpdated = await outcome(() => admin.updateTopic(topic));

  result.subscription = await outcome(() => admin.createSubscription("events", "audit", subscriptionOptions));
  result.subscriptionAgain = await outcome(() => admin.createSubscription("events", "audit"));
  result.forwarding = await outcome(() =>
    admin.createSubscription("events", "relay", {
      forwardTo: "sink",
      defaultRuleOptions: { name: "orders-only", filter: { sqlExpression: "kind = 'order'" } },
    }));
  result.relayRules = (await all(admin.listRules("events", "relay"))).map((r) => r.name);
  result.subscriptionFetched = await outcome(() => admin.getSubscription("events", "audit"));
  result.subscriptionExists = {
    audit: await admin.subscriptionExists("events", "audit"),
    missing: await admin.subscriptionExists("events", "missing"),
  };
  const subscription = await admin.getSubscription("events", "audit");
  subscription.maxDeliveryCount = 9;
  subscription.status = "ReceiveDisabled";
  subscription.forwardDeadLetteredMessagesTo = undefined;
  result.subscriptionUpdated = await outcome(() => admin.updateSubscription(subscription));
  result.subscriptionRefetched = await outcome(() => admin.getSubscription("events", "audit"));

  result.topicRuntime = await outcome(() => admin.getTopicRuntimeProperties(busyTopic));
  result.subscriptionRuntime = await outcome(() =>
    admin.getSubscriptionRuntimeProperties(busyTopic, busySubscription));
  result.topics = (await all(admin.listTopics())).map((t) => t.name);
  result.topicsRuntime = (await all(admin.listTopicsRuntimeProperties())).map((t) => [t.name, t.subscriptionCount]);
  result.subscriptions = (await all(admin.listSubscriptions("events"))).map((s) => [s.topicName, s.subscriptionName]);
  result.subscriptionsRuntime = (await all(admin.listSubscriptionsRuntimeProperties(busyTopic))).map((s) => [
    s.subscriptionName,
    s.activeMessageCount,
  ]);

  result.missing = {
    topic: await outcome(() => admin.getTopic("missing")),
    subscription: await outcome(() => admin.getSubscription("events", "missing")),
    subscriptionOfMissingTopic: await outcome(() => admin.getSubscription("missing", "audit")),
    deleteSubscription: await outcome(() => admin.deleteSubscription("events", "missing")),
  };
  result.subscriptionDeleted = await outcome(() => admin.deleteSubscription("events", "audit"));
  result.afterSubscriptionDelete = await outcome(() => admin.getSubscription("events", "audit"));
  result.topicDeleted = await outcome(() => admin.deleteTopic("events"));
  result.afterTopicDelete = await outcome(() => admin.getSubscription("events", "relay"));
  return result;
});
