// Rules through the SDK's rule manager (client.createRuleManager): add-rule, enumerate-rules and remove-rule
// on the subscription's $management node over AMQP, with Listen rights only (see test_js_rule_manager.py).
import { ServiceBusClient } from "@azure/service-bus";
import { connectionString, run, thrown } from "./lib/harness.mjs";
import { receiveAll, received } from "./lib/messages.mjs";

const client = new ServiceBusClient(connectionString(), { retryOptions: { maxRetries: 0, timeoutInMs: 10000 } });

async function listed(manager) {
  const rules = [];
  for await (const rule of manager.listRules()) rules.push(rule);
  return rules;
}

await run(async () => {
  const manager = client.createRuleManager("events", "picked");
  try {
    await manager.deleteRule("$Default");
    await manager.createRule("sql", { sqlExpression: "color = 'red'" }, { sqlExpression: "SET sys.Label = 'sql'" });
    await manager.createRule("corr", {
      correlationId: "cid", subject: "lbl", contentType: "application/json",
      applicationProperties: { kind: "urgent", level: 3, flag: true },
    });
    const afterAdd = await listed(manager);
    const pages = [];
    for await (const page of manager.listRules().byPage({ maxPageSize: 1 })) pages.push(page.map((r) => r.name));
    const duplicate = await thrown(() => manager.createRule("sql", { sqlExpression: "1=1" }));
    const badSql = await thrown(() => manager.createRule("bad", { sqlExpression: "color = = 'x'" }));
    const missing = await thrown(() => manager.deleteRule("no-such-rule"));

    const sender = client.createSender("events");
    await sender.sendMessages([
      { body: "red", messageId: "m1", applicationProperties: { color: "red" } },
      { body: "blue", messageId: "m2", applicationProperties: { color: "blue" } },
      { body: "urgent", messageId: "m3", correlationId: "cid", subject: "lbl", contentType: "application/json",
        applicationProperties: { kind: "urgent", level: 3, flag: true } },
    ]);
    await sender.close();
    const receiver = client.createReceiver("events", "picked", { receiveMode: "receiveAndDelete" });
    const got = (await receiveAll(receiver, 2)).map(received);
    got.push(...(await receiver.receiveMessages(10, { maxWaitTimeInMs: 300 })).map(received));
    await receiver.close();

    await manager.deleteRule("sql");
    await manager.deleteRule("corr");
    const afterRemove = await listed(manager);
    return { afterAdd, pages, duplicate, badSql, missing, got, afterRemove };
  } finally {
    await client.close();
  }
});
