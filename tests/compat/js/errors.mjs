// Every error class a JavaScript client meets, each as the SDK reports it (see test_js_errors.py).
// Clients do not retry here, so each error shows at once and its time is the broker's.
import { ServiceBusClient } from "@azure/service-bus";
import { connectionString, run, thrown } from "./lib/harness.mjs";

const noRetry = { retryOptions: { maxRetries: 0, timeoutInMs: 10000 } };
const client = new ServiceBusClient(connectionString(), noRetry);

async function timed(operation) {
  const started = Date.now();
  const error = await thrown(operation);
  return { error, ms: Date.now() - started };
}

function withKey(key) {
  return connectionString().replace(/SharedAccessKey=[^;]*/, `SharedAccessKey=${key}`);
}

async function entityNotFound() {
  const sender = client.createSender("no-such-queue");
  const send = await timed(() => sender.sendMessages({ body: "x" }));
  await sender.close();
  const receiver = client.createReceiver("no-such-queue");
  const receive = await timed(() => receiver.receiveMessages(1, { maxWaitTimeInMs: 2000 }));
  await receiver.close();
  return { send, receive };
}

async function wrongKey() {
  const wrong = new ServiceBusClient(withKey(Buffer.from("not the key").toString("base64")), noRetry);
  const sender = wrong.createSender("errors");
  const send = await timed(() => sender.sendMessages({ body: "x" }));
  const receiver = wrong.createReceiver("errors");
  const peek = await timed(() => receiver.peekMessages(1));
  await wrong.close();
  return { send, peek };
}

async function tooLarge() {
  const sender = client.createSender("errors");
  const big = await timed(() => sender.sendMessages({ body: Buffer.alloc(300 * 1024, 1) }));
  const batch = await sender.createMessageBatch();
  const fitsBatch = batch.tryAddMessage({ body: Buffer.alloc(300 * 1024, 1) });
  const list = await timed(() => sender.sendMessages([0, 1, 2].map(() => ({ body: Buffer.alloc(100 * 1024, 1) }))));
  await sender.sendMessages({ body: "still serving" });
  await sender.close();
  const receiver = client.createReceiver("errors", { receiveMode: "receiveAndDelete" });
  const after = await receiver.receiveMessages(5, { maxWaitTimeInMs: 2000 });
  await receiver.close();
  return { big, fitsBatch, maxSizeInBytes: batch.maxSizeInBytes, list, after: after.map((m) => m.body) };
}

async function sessionCannotBeLocked() {
  const sender = client.createSender("error-sessions");
  await sender.sendMessages({ body: "s", sessionId: "held" });
  await sender.close();
  const holder = await client.acceptSession("error-sessions", "held");
  const second = await timed(() => client.acceptSession("error-sessions", "held"));
  await holder.close();
  return { second };
}

// One message's lock runs out (lock duration 5 s) while another's is renewed half-way: settling the first
// fails with MessageLockLost, the renewed one completes.
async function locks() {
  const sender = client.createSender("locks");
  await sender.sendMessages([{ body: "expires", messageId: "expires" }, { body: "renewed", messageId: "renewed" }]);
  await sender.close();
  const receiver = client.createReceiver("locks", { maxAutoLockRenewalDurationInMs: 0 });
  const messages = await receiver.receiveMessages(2, { maxWaitTimeInMs: 3000 });
  const byBody = Object.fromEntries(messages.map((m) => [m.body, m]));
  const lockedUntil = byBody.renewed.lockedUntilUtc;
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const renewedUntil = await receiver.renewMessageLock(byBody.renewed);
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const lost = await timed(() => receiver.completeMessage(byBody.expires));
  const renewedComplete = await thrown(() => receiver.completeMessage(byBody.renewed));
  await receiver.close();
  return { lockedUntil, renewedUntil, lost, renewedComplete, count: messages.length };
}

await run(async () => {
  try {
    const [notFound, unauthorized, size, sessions, lockChecks] = await Promise.all([
      entityNotFound(), wrongKey(), tooLarge(), sessionCannotBeLocked(), locks(),
    ]);
    return { notFound, unauthorized, size, sessions, locks: lockChecks };
  } finally {
    await client.close();
  }
});
