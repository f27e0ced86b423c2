// The JS SDK as a client with no emulator mode uses the broker: the connection string in Azure's form (TLS,
// the broker's certificate trusted through NODE_EXTRA_CA_CERTS), over AMQPS or, with `websocket` as the
// argument, over WebSockets (the `ws` package; the WebSocket port as customEndpointAddress).
// Sends, receives and settles, reads the dead-letter queue, peeks, schedules and cancels, renews a lock,
// uses a session and its state, and tries a wrong key.
import { ServiceBusClient } from "@azure/service-bus";
import WebSocket from "ws";
import { connectionString, describeError, run } from "./lib/harness.mjs";

const noRetry = { retryOptions: { maxRetries: 0, timeoutInMs: 20000 } };

function options(transport) {
  if (transport !== "websocket") return noRetry;
  const port = process.env.SB_WEBSOCKET_PORT;
  return { ...noRetry, webSocketOptions: { webSocket: WebSocket }, customEndpointAddress: `https://localhost:${port}` };
}

async function settle(client, queue) {
  const sender = client.createSender(queue);
  await sender.sendMessages(["0", "1", "2"].map((id) => ({ body: `message ${id}`, messageId: id })));
  const receiver = client.createReceiver(queue);
  const got = [];
  while (got.length < 3) got.push(...(await receiver.receiveMessages(3 - got.length, { maxWaitTimeInMs: 5000 })));
  const byId = Object.fromEntries(got.map((m) => [m.messageId, m]));
  await receiver.completeMessage(byId["0"]);
  await receiver.deadLetterMessage(byId["1"], { deadLetterReason: "bad", deadLetterErrorDescription: "tested" });
  await receiver.abandonMessage(byId["2"]);
  const [again] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 5000 });
  await receiver.completeMessage(again);
  const deadLetters = client.createReceiver(queue, { subQueueType: "deadLetter" });
  const [dead] = await deadLetters.receiveMessages(1, { maxWaitTimeInMs: 5000 });
  await deadLetters.completeMessage(dead);
  return {
    received: got.map((m) => m.messageId).sort(),
    again: { messageId: again.messageId, deliveryCount: again.deliveryCount },
    dead: { messageId: dead.messageId, reason: dead.deadLetterReason },
  };
}

async function management(client, queue) {
  const sender = client.createSender(queue);
  const [scheduled] = await sender.scheduleMessages({ body: "later" }, new Date(Date.now() + 3600_000));
  await sender.cancelScheduledMessages(scheduled);
  await sender.sendMessages({ body: "peeked" });
  const receiver = client.createReceiver(queue);
  const peeked = (await receiver.peekMessages(10)).map((m) => m.body);
  const [message] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 5000 });
  const before = message.lockedUntilUtc.getTime();
  await new Promise((resolve) => setTimeout(resolve, 50));
  const renewed = (await receiver.renewMessageLock(message)).getTime() > before;
  await receiver.completeMessage(message);
  return { peeked, renewed, left: (await receiver.peekMessages(10)).length };
}

async function session(client, queue) {
  await client.createSender(queue).sendMessages(["0", "1"].map((body) => ({ body, sessionId: "js" })));
  const receiver = await client.acceptSession(queue, "js");
  await receiver.setSessionState("halfway");
  const state = String(await receiver.getSessionState());
  const got = await receiver.receiveMessages(2, { maxWaitTimeInMs: 5000 });
  for (const message of got) await receiver.completeMessage(message);
  return { state, bodies: got.map((m) => m.body) };
}

async function wrongKey(transport) {
  const key = Buffer.from("not the key").toString("base64");
  const wrong = new ServiceBusClient(connectionString().replace(/SharedAccessKey=[^;]*/, `SharedAccessKey=${key}`),
    options(transport));
  try {
    await wrong.createSender("q").sendMessages({ body: "never" });
    return null;
  } catch (error) {
    return describeError(error);
  } finally {
    await wrong.close();
  }
}

await run(async ([transport]) => {
  const client = new ServiceBusClient(connectionString(), options(transport));
  try {
    return {
      settle: await settle(client, "settle"),
      management: await management(client, "q"),
      session: await session(client, "sessions"),
      wrongKey: await wrongKey(transport),
    };
  } finally {
    await client.close();
  }
});
