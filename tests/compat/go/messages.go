// Received messages as the plain fields the tests compare, and receiving until a count arrived.
package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

var states = map[azservicebus.MessageState]string{
	azservicebus.MessageStateActive: "active", azservicebus.MessageStateDeferred: "deferred",
	azservicebus.MessageStateScheduled: "scheduled",
}

// A body as text when it is UTF-8, else {"base64": ...}.
func body(data []byte) any {
	if utf8.Valid(data) {
		return string(data)
	}
	return doc{"base64": base64.StdEncoding.EncodeToString(data)}
}

func received(m *azservicebus.ReceivedMessage) doc {
	var lockToken any
	if m.LockToken != [16]byte{} {
		lockToken = hex.EncodeToString(m.LockToken[:])
	}
	var timeToLive any
	if m.TimeToLive != nil {
		timeToLive = m.TimeToLive.Milliseconds()
	}
	// The Go type each application property decoded to: the AMQP type the broker sent.
	types := doc{}
	for key, value := range m.ApplicationProperties {
		types[key] = fmt.Sprintf("%T", value)
	}
	return doc{
		"body": body(m.Body), "messageId": m.MessageID, "subject": m.Subject, "correlationId": m.CorrelationID,
		"contentType": m.ContentType, "to": m.To, "replyTo": m.ReplyTo, "sessionId": m.SessionID,
		"replyToSessionId": m.ReplyToSessionID, "partitionKey": m.PartitionKey, "timeToLiveMs": timeToLive,
		"applicationProperties": m.ApplicationProperties, "applicationPropertyTypes": types,
		"sequenceNumber": m.SequenceNumber, "enqueuedSequenceNumber": m.EnqueuedSequenceNumber,
		"deliveryCount": m.DeliveryCount, "state": states[m.State], "lockToken": lockToken,
		"lockedUntil": timestamp(m.LockedUntil), "enqueuedTime": timestamp(m.EnqueuedTime),
		"expiresAt": timestamp(m.ExpiresAt), "scheduledEnqueueTime": timestamp(m.ScheduledEnqueueTime),
		"deadLetterReason": m.DeadLetterReason, "deadLetterErrorDescription": m.DeadLetterErrorDescription,
		"deadLetterSource": m.DeadLetterSource,
	}
}

func receivedAll(messages []*azservicebus.ReceivedMessage) []doc {
	out := make([]doc, len(messages))
	for i, m := range messages {
		out[i] = received(m)
	}
	return out
}

func bodies(messages []*azservicebus.ReceivedMessage) []any {
	out := make([]any, len(messages))
	for i, m := range messages {
		out[i] = body(m.Body)
	}
	return out
}

// What both receivers offer.
type messageReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// What both receivers settle with.
type messageCompleter interface {
	messageReceiver
	CompleteMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error
}

// receiveAll, each message then completed.
func receiveAndComplete(receiver messageCompleter, count int, wait time.Duration) []*azservicebus.ReceivedMessage {
	messages := receiveAll(receiver, count, wait)
	for _, m := range messages {
		must(receiver.CompleteMessage(background, m, nil))
	}
	return messages
}

// Receives until `count` messages arrived or `wait` passed without any.
func receiveAll(receiver messageReceiver, count int, wait time.Duration) []*azservicebus.ReceivedMessage {
	var all []*azservicebus.ReceivedMessage
	for len(all) < count {
		batch := receiveWithin(receiver, count-len(all), wait)
		if len(batch) == 0 {
			break
		}
		all = append(all, batch...)
	}
	return all
}

// One ReceiveMessages call: what arrived within `wait` (none is not an error).
func receiveWithin(receiver messageReceiver, count int, wait time.Duration) []*azservicebus.ReceivedMessage {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	messages, err := receiver.ReceiveMessages(ctx, count, nil)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		panic(err)
	}
	return messages
}

func text(value string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(value)}
}

func withID(value, id string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(value), MessageID: ptr(id)}
}

func byBody(messages []*azservicebus.ReceivedMessage) map[string]*azservicebus.ReceivedMessage {
	out := map[string]*azservicebus.ReceivedMessage{}
	for _, m := range messages {
		out[string(m.Body)] = m
	}
	return out
}
