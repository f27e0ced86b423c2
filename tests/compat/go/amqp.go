// AMQP messages as the Go SDK sends them whole (SendAMQPAnnotatedMessage): value and sequence bodies, every
// properties field in the AMQP type the client chose (a uuid or ulong message-id, binary user-id, the content
// encoding), custom message annotations, and what comes back of each on a receiver (RawAMQPMessage), each
// value with its Go type: the AMQP type the broker sent (see test_go_messaging.py).
package main

import (
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// A value as JSON, named by its Go type (which is the AMQP type go-amqp decoded).
func typed(value any) doc {
	switch v := value.(type) {
	case map[string]any:
		out := doc{}
		for key, item := range v {
			out[key] = typed(item)
		}
		return doc{"type": fmt.Sprintf("%T", value), "value": out}
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = typed(item)
		}
		return doc{"type": fmt.Sprintf("%T", value), "value": out}
	case amqp.UUID:
		return doc{"type": "amqp.UUID", "value": v.String()}
	case []byte:
		return doc{"type": "[]byte", "value": body(v)}
	case time.Time:
		return doc{"type": "time.Time", "value": v.UTC().Format(time.RFC3339Nano)}
	}
	return doc{"type": fmt.Sprintf("%T", value), "value": value}
}

func typedAnnotations(annotations map[any]any, keys ...string) doc {
	out := doc{}
	for _, key := range keys {
		if value, ok := annotations[key]; ok {
			out[key] = typed(value)
		}
	}
	return out
}

func amqpMessages(client *azservicebus.Client) doc {
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	messages := []*azservicebus.AMQPAnnotatedMessage{
		{
			Body:   azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"n": int64(1), "s": "x", "i": int32(2)}},
			Header: &azservicebus.AMQPAnnotatedMessageHeader{Priority: 7, Durable: true, TTL: time.Hour},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{
				MessageID: amqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, CorrelationID: uint64(99),
				ContentType: ptr("application/x-custom"), ContentEncoding: ptr("gzip"), UserID: []byte("me"),
				CreationTime: &created, GroupSequence: ptr(uint32(5)), Subject: ptr("value"),
			},
			MessageAnnotations: map[any]any{"x-opt-custom": "kept", "x-opt-number": int64(12)},
		},
		{Body: azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a", int64(1)}, {true}}},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: uint64(7), Subject: ptr("sequence")}},
		{Body: azservicebus.AMQPAnnotatedMessageBody{Value: "plain string"},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: []byte{1, 2}, Subject: ptr("string")}},
	}
	s := sender(client, "amqp")
	for _, m := range messages {
		must(s.SendAMQPAnnotatedMessage(background, m, nil))
	}
	must(s.Close(background))
	r := receiver(client, "amqp", nil)
	got := receiveAndComplete(r, len(messages), 3*time.Second)
	must(r.Close(background))
	out := []doc{}
	for _, m := range got {
		raw := m.RawAMQPMessage
		entry := doc{
			"value": typed(raw.Body.Value), "sequence": typed(toAny(raw.Body.Sequence)), "data": len(raw.Body.Data),
			"messageId": typed(raw.Properties.MessageID), "correlationId": typed(raw.Properties.CorrelationID),
			"contentType": raw.Properties.ContentType, "contentEncoding": raw.Properties.ContentEncoding,
			"userId": typed(raw.Properties.UserID), "creationTime": timestamp(raw.Properties.CreationTime),
			"groupSequence": raw.Properties.GroupSequence, "subject": raw.Properties.Subject,
			"annotations": typedAnnotations(raw.MessageAnnotations, "x-opt-custom", "x-opt-number",
				"x-opt-sequence-number", "x-opt-enqueued-time", "x-opt-locked-until", "x-opt-message-state"),
			"sdkMessageId": m.MessageID, "body": body(m.Body),
		}
		if raw.Header != nil {
			entry["header"] = doc{"priority": raw.Header.Priority, "durable": raw.Header.Durable,
				"ttlMs": raw.Header.TTL.Milliseconds(), "deliveryCount": raw.Header.DeliveryCount}
		}
		out = append(out, entry)
	}
	return doc{"received": out}
}

func toAny(sequence [][]any) any {
	if sequence == nil {
		return nil
	}
	out := make([]any, len(sequence))
	for i, section := range sequence {
		out[i] = section
	}
	return out
}
