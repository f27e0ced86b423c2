// The official emulator's connection string, unchanged but for the port: the JS SDK sends to and receives
// from a queue it creates through the administration client (the same string on the management port).
import { ServiceBusClient } from "@azure/service-bus";
import { adminClient } from "./lib/admin.mjs";
import { connectionString, run } from "./lib/harness.mjs";

await run(async ([queue]) => {
  await adminClient().createQueue(queue);
  const client = new ServiceBusClient(connectionString());
  try {
    const sender = client.createSender(queue);
    await sender.sendMessages({ body: "from the JS SDK", messageId: "js-1" });
    const receiver = client.createReceiver(queue);
    const [message] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 10000 });
    await receiver.completeMessage(message);
    const created = await adminClient().getQueue(queue);
    return { body: message.body, messageId: message.messageId, queues: created.name };
  } finally {
    await client.close();
  }
});
