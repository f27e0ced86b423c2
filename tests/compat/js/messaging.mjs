// Sending, receiving and settling with the JavaScript SDK: one run, many checks (see test_js_messaging.py).
import { ServiceBusClient } from "@azure/service-bus";
import { connectionString, run, thrown } from "./lib/harness.mjs";
import { receiveAll, received } from "./lib/messages.mjs";

const client = new ServiceBusClient(connectionString(), { retryOptions: { timeoutInMs: 10000 } });

async function sendAndReceive() {
  const sender = client.createSender("basic");
  const full = {
    body: { hello: "world" }, messageId: "m-full", subject: "subj", correlationId: "c1", contentType: "application/json",
    to: "dest", replyTo: "back", timeToLive: 300000, applicationProperties: { k: "v", n: 7, flag: true },
  };
  await sender.sendMessages(full);
  await sender.sendMessages({ body: "no id" });  // Service Bus assigns the id
  await sender.sendMessages([{ body: "list-0", messageId: "l0" }, { body: "list-1", messageId: "l1" }]);
  await sender.close();
  const receiver = client.createReceiver("basic");
  const messages = await receiveAll(receiver, 4);
  for (const message of messages) await receiver.completeMessage(message);
  const leftover = await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 });
  await receiver.close();
  return { messages: messages.map(received), leftover: leftover.length };
}

async function batchOfHundred() {
  const sender = client.createSender("batch");
  const batch = await sender.createMessageBatch();
  for (let i = 0; i < 100; i++) {
    if (!batch.tryAddMessage({ body: `b${i}`, messageId: `b${i}`, applicationProperties: { i } })) {
      throw new Error(`message ${i} did not fit a batch of ${batch.maxSizeInBytes} bytes`);
    }
  }
  await sender.sendMessages(batch);
  // A batch whose messages carry no id: each still gets its own.
  const anonymous = await sender.createMessageBatch();
  for (let i = 0; i < 3; i++) anonymous.tryAddMessage({ body: `a${i}` });
  await sender.sendMessages(anonymous);
  await sender.close();
  const receiver = client.createReceiver("batch", { receiveMode: "receiveAndDelete" });
  const messages = await receiveAll(receiver, 103);
  await receiver.close();
  return {
    maxSizeInBytes: batch.maxSizeInBytes, count: batch.count,
    bodies: messages.map((m) => m.body), ids: messages.map((m) => m.messageId),
    properties: messages.slice(0, 100).map((m) => m.applicationProperties.i),
    lockTokens: messages.map((m) => m.lockToken ?? null),
  };
}

async function settleEveryWay() {
  const sender = client.createSender("settle");
  await sender.sendMessages(["complete", "abandon", "defer", "deadletter"].map((body) => ({ body, messageId: body })));
  await sender.close();
  const receiver = client.createReceiver("settle");
  const first = await receiveAll(receiver, 4);
  const byBody = Object.fromEntries(first.map((m) => [m.body, m]));
  await receiver.completeMessage(byBody.complete);
  await receiver.abandonMessage(byBody.abandon, { abandonedBy: "js" });
  await receiver.deferMessage(byBody.defer);
  await receiver.deadLetterMessage(byBody.deadletter, { deadLetterReason: "bad-order", deadLetterErrorDescription: "total < 0" });
  const again = await receiveAll(receiver, 1);  // the abandoned one, delivered a second time
  const deferredSequence = byBody.defer.sequenceNumber;
  const [deferred] = await receiver.receiveDeferredMessages([deferredSequence]);
  await receiver.completeMessage(deferred);
  await receiver.abandonMessage(again[0]);  // max_delivery_count 2: the broker dead-letters it
  const rest = await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 });
  await receiver.close();
  const dlq = client.createReceiver("settle", { subQueueType: "deadLetter" });
  const deadLettered = await receiveAll(dlq, 2);
  for (const message of deadLettered) await dlq.completeMessage(message);
  await dlq.close();
  return {
    abandonedAgain: received(again[0]), deferred: received(deferred), afterSettling: rest.length,
    deadLettered: deadLettered.map(received),
  };
}

async function receiveAndDeleteAndPeek() {
  const sender = client.createSender("peek");
  await sender.sendMessages([0, 1, 2, 3, 4].map((i) => ({ body: `p${i}`, messageId: `p${i}` })));
  await sender.close();
  const receiver = client.createReceiver("peek", { receiveMode: "receiveAndDelete" });
  const firstPeek = await receiver.peekMessages(3);
  const nextPeek = await receiver.peekMessages(10);
  const fromStart = await receiver.peekMessages(2, { fromSequenceNumber: firstPeek[0].sequenceNumber });
  const taken = await receiveAll(receiver, 5);
  const emptyPeek = await receiver.peekMessages(5);
  await receiver.close();
  return {
    firstPeek: firstPeek.map(received), nextPeek: nextPeek.map((m) => m.body), fromStart: fromStart.map((m) => m.body),
    taken: taken.map(received), emptyPeek: emptyPeek.length,
  };
}

async function scheduleAndCancel() {
  const sender = client.createSender("schedule");
  const soon = new Date(Date.now() + 1500);
  const [kept] = await sender.scheduleMessages({ body: "kept", messageId: "kept" }, soon);
  const [cancelled] = await sender.scheduleMessages({ body: "cancelled", messageId: "cancelled" }, soon);
  await sender.cancelScheduledMessages(cancelled);
  const receiver = client.createReceiver("schedule");
  const peeked = await receiver.peekMessages(10);
  const messages = await receiveAll(receiver, 1, 4000);
  messages.push(...await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 }));
  for (const message of messages) await receiver.completeMessage(message);
  await Promise.all([sender.close(), receiver.close()]);
  return {
    sequenceNumbers: [kept, cancelled], peeked: peeked.map(received), received: messages.map(received),
    scheduledFor: soon.toISOString(), receivedAt: new Date().toISOString(),
  };
}

async function subscribeHandler() {
  const sender = client.createSender("subscribe");
  // Half without a message id: the receiver keys its lock renewal on the id the broker assigns.
  await sender.sendMessages([0, 1, 2, 3, 4, 5].map((i) => (i % 2 ? { body: `s${i}` } : { body: `s${i}`, messageId: `s${i}` })));
  await sender.close();
  const receiver = client.createReceiver("subscribe", { maxAutoLockRenewalDurationInMs: 60000 });
  const bodies = [];
  const errors = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`subscribe() got ${bodies.length} of 6 messages`)), 15000);
    receiver.subscribe({
      async processMessage(message) {
        bodies.push(message.body);
        if (bodies.length === 6) { clearTimeout(timer); resolve(); }
      },
      async processError(args) { errors.push(String(args.error)); },
    });
  });
  await receiver.close();
  const check = client.createReceiver("subscribe");
  const left = await check.receiveMessages(10, { maxWaitTimeInMs: 1000 });
  await check.close();
  return { bodies, errors, leftAfterAutoComplete: left.length };
}

async function duplicateDetection() {
  const sender = client.createSender("dedup");
  await sender.sendMessages({ body: "first", messageId: "same" });
  await sender.sendMessages({ body: "second", messageId: "same" });
  await sender.sendMessages({ body: "other", messageId: "other" });
  await sender.close();
  const receiver = client.createReceiver("dedup", { receiveMode: "receiveAndDelete" });
  const messages = await receiveAll(receiver, 3, 1500);
  await receiver.close();
  return messages.map((m) => m.body);
}

async function partitioned() {
  const sender = client.createSender("partitioned");
  const batch = await sender.createMessageBatch({ partitionKey: "pk-1" });
  for (let i = 0; i < 5; i++) batch.tryAddMessage({ body: `k${i}`, partitionKey: "pk-1" });
  await sender.sendMessages(batch);
  await sender.sendMessages({ body: "other-key", partitionKey: "pk-2" });
  const mismatch = await thrown(() => sender.sendMessages({ body: "x", partitionKey: "a", sessionId: "b" }));
  await sender.close();
  const receiver = client.createReceiver("partitioned");
  const messages = await receiveAll(receiver, 6);
  for (const message of messages) await receiver.completeMessage(message);
  await receiver.close();
  return { messages: messages.map(received), mismatch };
}

// Messages the Python SDK sent (test_js_messaging.py), and messages for it to receive.
async function interop() {
  const receiver = client.createReceiver("from-python");
  const messages = await receiveAll(receiver, 2);
  for (const message of messages) await receiver.completeMessage(message);
  await receiver.close();
  const sender = client.createSender("from-js");
  await sender.sendMessages({
    body: "from js", messageId: "js-1", subject: "interop", correlationId: "corr",
    contentType: "text/plain", timeToLive: 60000, applicationProperties: { text: "v", number: 42, yes: true },
  });
  const batch = await sender.createMessageBatch();
  batch.tryAddMessage({ body: Buffer.from([0, 1, 2, 255]), messageId: "js-2" });
  await sender.sendMessages(batch);
  await sender.close();
  return messages.map(received);
}

// A message that outlives its time to live: dead-lettered by the broker (checked at the end of the run).
async function sendExpiring() {
  const sender = client.createSender("expiring");
  await sender.sendMessages({ body: "short-lived", messageId: "ttl", timeToLive: 1000 });
  await sender.close();
}

async function expired() {
  const dlq = client.createReceiver("expiring", { subQueueType: "deadLetter", receiveMode: "receiveAndDelete" });
  const messages = await receiveAll(dlq, 1, 5000);
  await dlq.close();
  return messages.map(received);
}

await run(async () => {
  try {
    await sendExpiring();
    return {
      sendAndReceive: await sendAndReceive(),
      batch: await batchOfHundred(),
      settle: await settleEveryWay(),
      peek: await receiveAndDeleteAndPeek(),
      schedule: await scheduleAndCancel(),
      subscribe: await subscribeHandler(),
      dedup: await duplicateDetection(),
      partitioned: await partitioned(),
      interop: await interop(),
      expired: await expired(),
    };
  } finally {
    await client.close();
  }
});
