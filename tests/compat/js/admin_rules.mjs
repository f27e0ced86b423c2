// Rules through the JS ServiceBusAdministrationClient: SQL filters with parameters and actions,
// correlation filters with every field and typed properties, rules made by the Python SDK (true/false
// filters), update, exists, list, and the errors the client names.
import { run } from "./lib/harness.mjs";
import { adminClient, all, outcome } from "./lib/admin.mjs";

await run(async ([topic, subscription]) => {
  const admin = adminClient();
  const result = {};
  result.sql = await outcome(() =>
    admin.createRule(
      topic,
      subscription,
      "priced",
      { sqlExpression: "price > @limit AND region = @region", sqlParameters: { "@limit": 10.5, "@region": "eu" } },
      { sqlExpression: "SET flagged = @flag", sqlParameters: { "@flag": true } },
    ));
  result.correlation = await outcome(() =>
    admin.createRule(topic, subscription, "matched", {
      correlationId: "cid",
      messageId: "mid",
      to: "to",
      replyTo: "rt",
      subject: "lbl",
      sessionId: "sess",
      replyToSessionId: "rts",
      contentType: "application/json",
      applicationProperties: { k: "v", n: 5, on: true, at: new Date("2024-01-01T00:00:00Z") },
    }));
  result.again = await outcome(() => admin.createRule(topic, subscription, "priced", { sqlExpression: "1=1" }));
  result.badSql = await outcome(() => admin.createRule(topic, subscription, "broken", { sqlExpression: "a = = 1" }));
  result.fetched = await outcome(() => admin.getRule(topic, subscription, "priced"));
  result.exists = {
    priced: await admin.ruleExists(topic, subscription, "priced"),
    missing: await admin.ruleExists(topic, subscription, "missing"),
  };

  const rule = await admin.getRule(topic, subscription, "priced");
  rule.filter = { sqlExpression: "price > 100" };
  rule.action = undefined;
  result.updated = await outcome(() => admin.updateRule(topic, subscription, rule));
  result.refetched = await outcome(() => admin.getRule(topic, subscription, "priced"));

  result.listed = (await all(admin.listRules(topic, subscription))).map((r) => ({
    name: r.name,
    filter: r.filter,
    action: r.action,
  }));
  result.missing = {
    get: await outcome(() => admin.getRule(topic, subscription, "missing")),
    delete: await outcome(() => admin.deleteRule(topic, subscription, "missing")),
    update: await outcome(() =>
      admin.updateRule(topic, subscription, { name: "missing", filter: { sqlExpression: "1=1" } })),
    ofMissingSubscription: await outcome(() => admin.getRule(topic, "missing", "priced")),
  };
  result.deleted = await outcome(() => admin.deleteRule(topic, subscription, "matched"));
  result.afterDelete = await outcome(() => admin.getRule(topic, subscription, "matched"));
  return result;
});
