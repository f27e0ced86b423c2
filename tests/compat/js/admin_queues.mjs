// Queues through the JS ServiceBusAdministrationClient: every property, update, exists, runtime counts
// (messages put there by the test), lists, the namespace, and the errors the client names.
import { adminConnectionString, run } from "./lib/harness.mjs";
import { adminClient, all, outcome } from "./lib/admin.mjs";

const options = {
  lockDuration: "PT45S",
  maxSizeInMegabytes: 2048,
  requiresDuplicateDetection: true,
  requiresSession: false,
  defaultMessageTimeToLive: "P1D",
  deadLetteringOnMessageExpiration: true,
  duplicateDetectionHistoryTimeWindow: "PT5M",
  maxDeliveryCount: 4,
  enableBatchedOperations: false,
  userMetadata: "owner=billing",
  autoDeleteOnIdle: "PT2H",
  enablePartitioning: true,
  forwardTo: "archive",
  forwardDeadLetteredMessagesTo: "archive",
};

await run(async ([busyQueue]) => {
  const admin = adminClient();
  const result = { namespace: await outcome(() => admin.getNamespaceProperties()) };
  result.createdArchive = await outcome(() => admin.createQueue("archive"));
  result.created = await outcome(() => admin.createQueue("orders", options));
  result.createdAgain = await outcome(() => admin.createQueue("orders"));
  result.fetched = await outcome(() => admin.getQueue("orders"));
  result.exists = { orders: await admin.queueExists("orders"), missing: await admin.queueExists("missing") };

  const queue = await admin.getQueue("orders");
  queue.maxDeliveryCount = 7;
  queue.userMetadata = "owner=payments";
  queue.status = "SendDisabled";
  queue.forwardTo = undefined;
  result.updated = await outcome(() => admin.updateQueue(queue));
  result.refetched = await outcome(() => admin.getQueue("orders"));

  result.runtime = await outcome(() => admin.getQueueRuntimeProperties(busyQueue));
  result.listed = (await all(admin.listQueues())).map((q) => q.name);
  result.listedRuntime = (await all(admin.listQueuesRuntimeProperties())).map((q) => [q.name, q.activeMessageCount]);

  result.missing = {
    get: await outcome(() => admin.getQueue("missing")),
    runtime: await outcome(() => admin.getQueueRuntimeProperties("missing")),
    update: await outcome(() => admin.updateQueue({ ...queue, name: "missing" })),
    delete: await outcome(() => admin.deleteQueue("missing")),
  };
  const reader = {
    claimType: "SharedAccessKey",
    accessRights: ["Listen"],
    keyName: "reader",
    primaryKey: "cHJpbWFyeQ==",
  };
  result.authorizationRules = await outcome(() => admin.createQueue("guarded", { authorizationRules: [reader] }));
  result.deleted = await outcome(() => admin.deleteQueue("orders"));
  result.afterDelete = await outcome(() => admin.getQueue("orders"));

  const wrongKey = adminConnectionString().replace(/SharedAccessKey=[^;]*/, "SharedAccessKey=bm90LXRoZS1rZXk=");
  result.wrongKey = await outcome(() => adminClient(wrongKey).getQueue("archive"));
  return result;
});
