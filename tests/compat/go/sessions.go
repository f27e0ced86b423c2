// Sessions with the Go SDK: a named session with state, its lock renewed, the sessions a queue lists,
// next-available sessions, and a session another receiver holds (see test_go_sessions.py).
package main

import (
	"context"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func sessions([]string) doc {
	client := newClient(connectionString(), nil)
	defer client.Close(background)
	return doc{"named": namedSessionWithState(client), "deferred": deferredInSession(client),
		"next": nextAvailable(client)}
}

func inSession(value, session string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(value), SessionID: ptr(session)}
}

func namedSessionWithState(client *azservicebus.Client) doc {
	s := sender(client, "sessions")
	for _, b := range []string{"a1", "a2", "a3"} {
		must(s.SendMessage(background, inSession(b, "A"), nil))
	}
	must(s.SendMessage(background, inSession("b1", "B"), nil))
	refused := s.SendMessage(background, text("no session"), nil)
	must(s.Close(background))

	receiver := mustGet(client.AcceptSessionForQueue(background, "sessions", "A", nil))
	lockedUntil := receiver.LockedUntil()
	initialState := mustGet(receiver.GetSessionState(background, nil))
	must(receiver.SetSessionState(background, []byte(`{"step":2}`), nil))
	state := mustGet(receiver.GetSessionState(background, nil))
	time.Sleep(20 * time.Millisecond)
	must(receiver.RenewSessionLock(background, nil))
	renewedUntil := receiver.LockedUntil()
	messages := receiveAndComplete(receiver, 3, 3*time.Second)
	_, taken := client.AcceptSessionForQueue(background, "sessions", "A", nil)

	listed := []string{}
	pager := client.NewListSessionsForQueuePager("sessions", nil)
	for pager.More() {
		listed = append(listed, mustGet(pager.NextPage(background)).Sessions...)
	}
	other := mustGet(client.AcceptSessionForQueue(background, "sessions", "B", nil))
	peekedB := mustGet(other.PeekMessages(background, 5, nil))
	must(other.Close(background))

	must(receiver.SetSessionState(background, nil, nil))
	must(receiver.Close(background))
	again := mustGet(client.AcceptSessionForQueue(background, "sessions", "A", nil))
	clearedState := mustGet(again.GetSessionState(background, nil))
	must(again.Close(background))

	sessionIDs := []any{}
	for _, m := range messages {
		sessionIDs = append(sessionIDs, m.SessionID)
	}
	return doc{
		"sessionId": receiver.SessionID(), "lockedUntil": timestamp(&lockedUntil),
		"renewedUntil": timestamp(&renewedUntil), "initialState": nullable(initialState),
		"state": nullable(state), "clearedState": nullable(clearedState), "bodies": bodies(messages),
		"sessionIds": sessionIDs, "refused": describeError(refused), "taken": describeError(taken),
		"listed": listed, "peekedB": bodies(peekedB),
	}
}

func nullable(state []byte) any {
	if state == nil {
		return nil
	}
	return string(state)
}

func nextAvailable(client *azservicebus.Client) doc {
	s := sender(client, "sessions-next")
	for _, m := range []*azservicebus.Message{inSession("x1", "X"), inSession("y1", "Y"), inSession("x2", "X")} {
		must(s.SendMessage(background, m, nil))
	}
	must(s.Close(background))
	got := doc{}
	for i := 0; i < 2; i++ {
		ctx, cancel := within(10)
		receiver := mustGet(client.AcceptNextSessionForQueue(ctx, "sessions-next", nil))
		cancel()
		messages := receiveAndComplete(receiver, 2, time.Second)
		got[receiver.SessionID()] = bodies(messages)
		defer receiver.Close(background)
	}
	// No session left: the broker answers when the timeout the client asks for (its context's deadline less
	// a random jitter of up to 1 %) runs out. When the jitter is below the broker's latency the context ends
	// first, in about one try of four on an idle machine and more often on a loaded one; up to eight tries,
	// the first answer kept.
	tries := []doc{}
	for len(tries) < 8 {
		ctx, cancel := within(4)
		started := time.Now()
		_, none := client.AcceptNextSessionForQueue(ctx, "sessions-next", nil)
		expired := errors.Is(none, context.DeadlineExceeded) // not the broker's answer, however late it came
		cancel()
		tries = append(tries, doc{"error": describeError(none), "ms": time.Since(started).Milliseconds()})
		if !expired {
			break
		}
	}
	return doc{"got": got, "tries": tries}
}

// A message deferred in a session, then asked back by its sequence number through the session receiver:
// the Go SDK's request names no session (the .NET, Java, JavaScript and Python SDKs send session-id, which
// Service Bus needs), so it is refused at once.
func deferredInSession(client *azservicebus.Client) doc {
	s := sender(client, "sessions")
	must(s.SendMessage(background, inSession("later", "D"), nil))
	must(s.Close(background))
	session := mustGet(client.AcceptSessionForQueue(background, "sessions", "D", nil))
	first := receiveAll(session, 1, 3*time.Second)[0]
	must(session.DeferMessage(background, first, nil))
	peeked := mustGet(session.PeekMessages(background, 5, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))}))
	_, refused := session.ReceiveDeferredMessages(background, []int64{*first.SequenceNumber}, nil)
	must(session.Close(background))
	return doc{"peeked": receivedAll(peeked), "refused": describeError(refused)}
}
