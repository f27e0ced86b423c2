// Topics with the JavaScript SDK: SQL filters and actions on subscriptions, and an autoforward chain
// (see test_js_topics.py).
import { ServiceBusClient } from "@azure/service-bus";
import { connectionString, run } from "./lib/harness.mjs";
import { receiveAll, received } from "./lib/messages.mjs";

const client = new ServiceBusClient(connectionString(), { retryOptions: { timeoutInMs: 10000 } });

// What reached an entity: `expected` messages, then a short look for any more.
async function drain(expected, ...entity) {
  const receiver = client.createReceiver(...entity, { receiveMode: "receiveAndDelete" });
  const messages = await receiveAll(receiver, expected);
  messages.push(...await receiver.receiveMessages(10, { maxWaitTimeInMs: 300 }));
  await receiver.close();
  return messages.map(received);
}

async function filtersAndActions() {
  const sender = client.createSender("orders");
  await sender.sendMessages([
    { body: "red-big", messageId: "o1", subject: "order", applicationProperties: { color: "red", quantity: 12 } },
    { body: "red-small", messageId: "o2", subject: "order", applicationProperties: { color: "red", quantity: 1 } },
    { body: "blue", messageId: "o3", subject: "refund", applicationProperties: { color: "blue", quantity: 50 } },
  ]);
  await sender.close();
  return {
    all: await drain(3, "orders", "all"),
    red: await drain(2, "orders", "red"),
    big: await drain(1, "orders", "big"),
    refundsForwarded: await drain(1, "refunds"),
  };
}

async function autoforwardChain() {
  const sender = client.createSender("chain-start");
  await sender.sendMessages([{ body: "hop-1", messageId: "h1" }, { body: "hop-2", messageId: "h2" }]);
  await sender.close();
  return { end: await drain(2, "chain-end") };
}

await run(async () => {
  try {
    return { filters: await filtersAndActions(), chain: await autoforwardChain() };
  } finally {
    await client.close();
  }
});
