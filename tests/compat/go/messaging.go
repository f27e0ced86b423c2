// Sending, receiving and settling with the Go SDK: one run, many checks (see test_go_messaging.py).
package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func messaging([]string) doc {
	client := newClient(connectionString(), nil)
	defer client.Close(background)
	sendExpiring(client)
	return doc{
		"sendAndReceive": sendAndReceive(client),
		"batch":          batchOfHundred(client),
		"settle":         settleEveryWay(client),
		"peek":           receiveAndDeleteAndPeek(client),
		"schedule":       scheduleAndCancel(client),
		"dedup":          duplicateDetection(client),
		"partitioned":    partitioned(client),
		"interop":        interop(client),
		"expired":        expired(client),
		"amqp":           amqpMessages(client),
		"released":       releasedAfterReceive(client),
		"transferDLQ":    transferDeadLetters(client),
	}
}

func sender(client *azservicebus.Client, entity string) *azservicebus.Sender {
	return mustGet(client.NewSender(entity, nil))
}

func receiver(client *azservicebus.Client, queue string, options *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	return mustGet(client.NewReceiverForQueue(queue, options))
}

var receiveAndDelete = &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}
var deadLetterQueue = &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter}

func sendAndReceive(client *azservicebus.Client) doc {
	s := sender(client, "basic")
	must(s.SendMessage(background, &azservicebus.Message{
		Body: []byte(`{"hello":"world"}`), MessageID: ptr("m-full"), Subject: ptr("subj"), CorrelationID: ptr("c1"),
		ContentType: ptr("application/json"), To: ptr("dest"), ReplyTo: ptr("back"), ReplyToSessionID: ptr("rs"),
		TimeToLive:            ptr(5 * time.Minute),
		ApplicationProperties: map[string]any{"k": "v", "n": int64(7), "i": int32(3), "flag": true, "f": 2.5},
	}, nil))
	must(s.SendMessage(background, text("no id"), nil)) // Service Bus assigns the id
	batch := mustGet(s.NewMessageBatch(background, nil))
	must(batch.AddMessage(withID("list-0", "l0"), nil))
	must(batch.AddMessage(withID("list-1", "l1"), nil))
	must(s.SendMessageBatch(background, batch, nil))
	must(s.Close(background))
	r := receiver(client, "basic", nil)
	messages := receiveAndComplete(r, 4, 3*time.Second)
	leftover := receiveWithin(r, 1, 500*time.Millisecond)
	must(r.Close(background))
	return doc{"messages": receivedAll(messages), "leftover": len(leftover)}
}

func batchOfHundred(client *azservicebus.Client) doc {
	s := sender(client, "batch")
	batch := mustGet(s.NewMessageBatch(background, nil))
	for i := 0; i < 100; i++ {
		message := withID(fmt.Sprintf("b%d", i), fmt.Sprintf("b%d", i))
		message.ApplicationProperties = map[string]any{"i": int64(i)}
		must(batch.AddMessage(message, nil))
	}
	must(s.SendMessageBatch(background, batch, nil))
	anonymous := mustGet(s.NewMessageBatch(background, nil)) // no ids: each still gets its own
	for i := 0; i < 3; i++ {
		must(anonymous.AddMessage(text(fmt.Sprintf("a%d", i)), nil))
	}
	must(s.SendMessageBatch(background, anonymous, nil))
	// The batch's limit is the attach's max-message-size: a message over it does not fit.
	tooBig := errors.Is(mustGet(s.NewMessageBatch(background, nil)).AddMessage(
		&azservicebus.Message{Body: make([]byte, 300*1024)}, nil), azservicebus.ErrMessageTooLarge)
	must(s.Close(background))
	r := receiver(client, "batch", receiveAndDelete)
	messages := receiveAll(r, 103, 3*time.Second)
	must(r.Close(background))
	ids, properties, lockTokens := []string{}, []any{}, []any{}
	for i, m := range messages {
		ids = append(ids, m.MessageID)
		if i < 100 {
			properties = append(properties, m.ApplicationProperties["i"])
		}
		lockTokens = append(lockTokens, received(m)["lockToken"])
	}
	return doc{"count": batch.NumMessages(), "bodies": bodies(messages), "ids": ids, "properties": properties,
		"lockTokens": lockTokens, "tooBigFits": !tooBig}
}

func settleEveryWay(client *azservicebus.Client) doc {
	s := sender(client, "settle")
	for _, b := range []string{"complete", "abandon", "defer", "deadletter"} {
		must(s.SendMessage(background, withID(b, b), nil))
	}
	must(s.Close(background))
	r := receiver(client, "settle", nil)
	first := byBody(receiveAll(r, 4, 3*time.Second))
	must(r.CompleteMessage(background, first["complete"], nil))
	must(r.AbandonMessage(background, first["abandon"], &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"abandonedBy": "go"}}))
	must(r.DeferMessage(background, first["defer"], &azservicebus.DeferMessageOptions{
		PropertiesToModify: map[string]any{"deferredBy": "go"}}))
	must(r.DeadLetterMessage(background, first["deadletter"], &azservicebus.DeadLetterOptions{
		Reason: ptr("bad-order"), ErrorDescription: ptr("total < 0"),
		PropertiesToModify: map[string]any{"checkedBy": "go"}}))
	again := receiveAll(r, 1, 3*time.Second) // the abandoned one, delivered a second time
	deferredNumber := []int64{*first["defer"].SequenceNumber}
	once := mustGet(r.ReceiveDeferredMessages(background, deferredNumber, nil))
	// deferred again (through the management link, with a property), then received back once more
	must(r.DeferMessage(background, once[0], &azservicebus.DeferMessageOptions{
		PropertiesToModify: map[string]any{"deferredAgain": true}}))
	deferred := mustGet(r.ReceiveDeferredMessages(background, deferredNumber, nil))
	renewedDeferred := r.RenewMessageLock(background, deferred[0], nil)
	must(r.CompleteMessage(background, deferred[0], nil))
	must(r.AbandonMessage(background, again[0], nil)) // max delivery count 2: the broker dead-letters it
	rest := receiveWithin(r, 1, time.Second)
	must(r.Close(background))
	dlq := receiver(client, "settle", deadLetterQueue)
	deadLettered := receiveAndComplete(dlq, 2, 3*time.Second)
	must(dlq.Close(background))
	return doc{"abandonedAgain": received(again[0]), "deferred": received(deferred[0]),
		"renewedDeferred": describeError(renewedDeferred), "afterSettling": len(rest),
		"deadLettered": receivedAll(deadLettered)}
}

func receiveAndDeleteAndPeek(client *azservicebus.Client) doc {
	s := sender(client, "peek")
	for i := 0; i < 5; i++ {
		must(s.SendMessage(background, withID(fmt.Sprintf("p%d", i), fmt.Sprintf("p%d", i)), nil))
	}
	must(s.Close(background))
	r := receiver(client, "peek", receiveAndDelete)
	firstPeek := mustGet(r.PeekMessages(background, 3, nil))
	nextPeek := mustGet(r.PeekMessages(background, 10, nil)) // the receiver remembers where it stopped
	fromStart := mustGet(r.PeekMessages(background, 2, &azservicebus.PeekMessagesOptions{
		FromSequenceNumber: firstPeek[0].SequenceNumber}))
	taken := receiveAll(r, 5, 3*time.Second)
	emptyPeek := mustGet(r.PeekMessages(background, 5, nil))
	must(r.Close(background))
	return doc{"firstPeek": receivedAll(firstPeek), "nextPeek": bodies(nextPeek), "fromStart": bodies(fromStart),
		"taken": receivedAll(taken), "emptyPeek": len(emptyPeek)}
}

func scheduleAndCancel(client *azservicebus.Client) doc {
	s := sender(client, "schedule")
	soon := time.Now().Add(1500 * time.Millisecond)
	numbers := mustGet(s.ScheduleMessages(background, []*azservicebus.Message{
		withID("kept", "kept"), withID("cancelled", "cancelled")}, soon, nil))
	must(s.CancelScheduledMessages(background, numbers[1:], nil))
	// The other way the SDK schedules: a sent message with a scheduled enqueue time (an annotation).
	must(s.SendMessage(background, &azservicebus.Message{Body: []byte("annotated"), ScheduledEnqueueTime: &soon}, nil))
	r := receiver(client, "schedule", nil)
	peeked := mustGet(r.PeekMessages(background, 10, nil))
	messages := receiveAndComplete(r, 2, 4*time.Second)
	messages = append(messages, receiveWithin(r, 1, 500*time.Millisecond)...) // none: the cancelled one is gone
	must(s.Close(background))
	must(r.Close(background))
	return doc{"sequenceNumbers": numbers, "peeked": receivedAll(peeked), "received": receivedAll(messages),
		"scheduledFor": soon.UTC().Format(time.RFC3339Nano)}
}

func duplicateDetection(client *azservicebus.Client) []any {
	s := sender(client, "dedup")
	must(s.SendMessage(background, withID("first", "same"), nil))
	must(s.SendMessage(background, withID("second", "same"), nil))
	must(s.SendMessage(background, withID("other", "other"), nil))
	must(s.Close(background))
	r := receiver(client, "dedup", receiveAndDelete)
	messages := receiveAll(r, 3, 1500*time.Millisecond)
	must(r.Close(background))
	return bodies(messages)
}

func partitioned(client *azservicebus.Client) doc {
	s := sender(client, "partitioned")
	batch := mustGet(s.NewMessageBatch(background, nil))
	for i := 0; i < 5; i++ {
		must(batch.AddMessage(&azservicebus.Message{Body: []byte(fmt.Sprintf("k%d", i)), PartitionKey: ptr("pk-1")}, nil))
	}
	must(s.SendMessageBatch(background, batch, nil))
	must(s.SendMessage(background, &azservicebus.Message{Body: []byte("other-key"), PartitionKey: ptr("pk-2")}, nil))
	must(s.Close(background))
	r := receiver(client, "partitioned", nil)
	messages := receiveAndComplete(r, 6, 3*time.Second)
	must(r.Close(background))
	return doc{"messages": receivedAll(messages)}
}

// Messages the Python SDK sent (test_go_messaging.py), and messages for it to receive.
func interop(client *azservicebus.Client) []doc {
	r := receiver(client, "from-python", nil)
	messages := receiveAndComplete(r, 2, 3*time.Second)
	must(r.Close(background))
	s := sender(client, "from-go")
	must(s.SendMessage(background, &azservicebus.Message{
		Body: []byte("from go"), MessageID: ptr("go-1"), Subject: ptr("interop"), CorrelationID: ptr("corr"),
		ContentType: ptr("text/plain"), TimeToLive: ptr(time.Minute),
		ApplicationProperties: map[string]any{"text": "v", "number": int64(42), "yes": true},
	}, nil))
	must(s.SendMessage(background, &azservicebus.Message{Body: []byte{0, 1, 2, 255}, MessageID: ptr("go-2")}, nil))
	must(s.Close(background))
	return receivedAll(messages)
}

// A message that outlives its time to live: dead-lettered by the broker (checked at the end of the run).
func sendExpiring(client *azservicebus.Client) {
	s := sender(client, "expiring")
	must(s.SendMessage(background, &azservicebus.Message{Body: []byte("short-lived"), MessageID: ptr("ttl"),
		TimeToLive: ptr(time.Second)}, nil))
	must(s.Close(background))
}

func expired(client *azservicebus.Client) []doc {
	dlq := receiver(client, "expiring", &azservicebus.ReceiverOptions{
		SubQueue: azservicebus.SubQueueDeadLetter, ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	messages := receiveAll(dlq, 1, 5*time.Second)
	must(dlq.Close(background))
	return receivedAll(messages)
}

// A receive that ends with credit left on the link: messages arriving afterwards are released by the SDK
// (its releaser), so another receiver gets them at once, their delivery count not raised.
func releasedAfterReceive(client *azservicebus.Client) doc {
	idle := receiver(client, "release", nil)
	early := receiveWithin(idle, 3, 300*time.Millisecond) // nothing yet: 3 credits stay on the link
	s := sender(client, "release")
	must(s.SendMessage(background, withID("late-1", "late-1"), nil))
	must(s.SendMessage(background, withID("late-2", "late-2"), nil))
	must(s.Close(background))
	other := receiver(client, "release", nil)
	got := receiveAndComplete(other, 2, 5*time.Second)
	must(other.Close(background))
	must(idle.Close(background))
	counts := []uint32{}
	for _, m := range got {
		counts = append(counts, m.DeliveryCount)
	}
	return doc{"early": len(early), "bodies": bodies(got), "deliveryCounts": counts}
}

// The transfer dead-letter queue (SubQueueTransfer): a queue forwarding to one that refuses sends keeps
// the message there, with the reason.
func transferDeadLetters(client *azservicebus.Client) []doc {
	s := sender(client, "forwarder")
	must(s.SendMessage(background, withID("undeliverable", "fwd-1"), nil))
	must(s.Close(background))
	r := receiver(client, "forwarder", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueTransfer})
	messages := receiveAndComplete(r, 1, 3*time.Second)
	must(r.Close(background))
	return receivedAll(messages)
}
