// Sessions with the JavaScript SDK: a named session with state, next-available, lock renewal, and a
// session another receiver holds (see test_js_sessions.py).
import { ServiceBusClient } from "@azure/service-bus";
import { connectionString, run, thrown } from "./lib/harness.mjs";
import { receiveAll } from "./lib/messages.mjs";

const client = new ServiceBusClient(connectionString(), { retryOptions: { maxRetries: 0, timeoutInMs: 10000 } });

async function namedSessionWithState() {
  const sender = client.createSender("sessions");
  await sender.sendMessages(["a1", "a2", "a3"].map((body) => ({ body, sessionId: "A" })));
  await sender.sendMessages({ body: "b1", sessionId: "B" });
  const refused = await thrown(() => sender.sendMessages({ body: "no session" }));
  await sender.close();
  const receiver = await client.acceptSession("sessions", "A");
  const lockedUntil = receiver.sessionLockedUntilUtc;
  const initialState = await receiver.getSessionState();
  await receiver.setSessionState({ step: 2 });
  const state = await receiver.getSessionState();
  const renewedUntil = await receiver.renewSessionLock();
  const messages = await receiveAll(receiver, 3);
  for (const message of messages) await receiver.completeMessage(message);
  const taken = await thrown(() => client.acceptSession("sessions", "A"));
  const sessions = await listedSessions();
  await receiver.setSessionState(null);
  await receiver.close();
  const again = await client.acceptSession("sessions", "A");
  const clearedState = await again.getSessionState();
  await again.close();
  return {
    sessionId: receiver.sessionId, lockedUntil, renewedUntil, initialState: initialState ?? null, state,
    clearedState: clearedState ?? null, bodies: messages.map((m) => m.body),
    sessionIds: messages.map((m) => m.sessionId), refused, taken, sessions,
  };
}

// Sessions with messages, as `peekMessages` sees them through a session receiver of each.
async function listedSessions() {
  const receiver = await client.acceptSession("sessions", "B");
  const peeked = await receiver.peekMessages(5);
  await receiver.close();
  return { B: peeked.map((m) => m.body) };
}

async function nextAvailable() {
  const sender = client.createSender("sessions-next");
  await sender.sendMessages([{ body: "x1", sessionId: "X" }, { body: "y1", sessionId: "Y" }, { body: "x2", sessionId: "X" }]);
  await sender.close();
  const first = await client.acceptNextSession("sessions-next");
  const second = await client.acceptNextSession("sessions-next");
  const got = {};
  for (const receiver of [first, second]) {
    const messages = await receiveAll(receiver, 2, 1000);
    for (const message of messages) await receiver.completeMessage(message);
    got[receiver.sessionId] = messages.map((m) => m.body);
  }
  // No session left: the broker answers when the client's timeout (2 s here) runs out.
  const impatient = new ServiceBusClient(connectionString(), { retryOptions: { maxRetries: 0, timeoutInMs: 2000 } });
  const started = Date.now();
  const none = await thrown(() => impatient.acceptNextSession("sessions-next"));
  const waitedMs = Date.now() - started;
  await impatient.close();
  await Promise.all([first.close(), second.close()]);
  return { got, none, waitedMs };
}

await run(async () => {
  try {
    return { named: await namedSessionWithState(), next: await nextAvailable() };
  } finally {
    await client.close();
  }
});
