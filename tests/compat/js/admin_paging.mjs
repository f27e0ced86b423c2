// Lists longer than one page (the service's page is 100): every entity once, in order, whether the
// client follows the next links itself, reads page by page, or resumes from a continuation token.
import { run } from "./lib/harness.mjs";
import { adminClient, all } from "./lib/admin.mjs";

async function pages(iterator) {
  const sizes = [];
  const names = [];
  for await (const page of iterator) {
    sizes.push(page.length);
    names.push(...page.map((item) => item.subscriptionName ?? item.name));
  }
  return { sizes, names };
}

await run(async ([topic, subscription]) => {
  const admin = adminClient();
  const firstPage = await admin.listQueues().byPage({ maxPageSize: 40 }).next();
  const result = {
    queues: (await all(admin.listQueues())).map((q) => q.name),
    queuesRuntime: (await all(admin.listQueuesRuntimeProperties())).length,
    queuePages: await pages(admin.listQueues().byPage({ maxPageSize: 40 })),
    resumed: await pages(admin.listQueues().byPage({ continuationToken: firstPage.value.continuationToken })),
    firstPage: { size: firstPage.value.length, continuationToken: firstPage.value.continuationToken },
    topics: (await all(admin.listTopics())).map((t) => t.name),
    subscriptions: (await all(admin.listSubscriptions(topic))).map((s) => s.subscriptionName),
    rules: (await all(admin.listRules(topic, subscription))).map((r) => r.name),
  };
  return result;
});
