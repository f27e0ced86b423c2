// Received messages as the plain fields the tests compare.
export function received(message) {
  return {
    body: message.body,
    messageId: message.messageId,
    subject: message.subject,
    correlationId: message.correlationId,
    contentType: message.contentType,
    to: message.to,
    replyTo: message.replyTo,
    sessionId: message.sessionId,
    partitionKey: message.partitionKey,
    timeToLive: message.timeToLive,
    applicationProperties: message.applicationProperties,
    sequenceNumber: message.sequenceNumber,
    enqueuedSequenceNumber: message.enqueuedSequenceNumber,
    deliveryCount: message.deliveryCount,
    state: message.state,
    lockToken: message.lockToken,
    lockedUntilUtc: message.lockedUntilUtc,
    enqueuedTimeUtc: message.enqueuedTimeUtc,
    deadLetterReason: message.deadLetterReason,
    deadLetterErrorDescription: message.deadLetterErrorDescription,
    deadLetterSource: message.deadLetterSource,
  };
}

// Receives until `count` messages arrived or `maxWaitTimeInMs` passed without any.
export async function receiveAll(receiver, count, maxWaitTimeInMs = 3000) {
  const all = [];
  while (all.length < count) {
    const batch = await receiver.receiveMessages(count - all.length, { maxWaitTimeInMs });
    if (batch.length === 0) break;
    all.push(...batch);
  }
  return all;
}
