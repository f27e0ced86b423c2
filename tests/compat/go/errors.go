// Every error a Go client meets, as the SDK reports it (*azservicebus.Error codes over the AMQP condition
// underneath; see test_go_errors.py). Clients do not retry here, so each error shows at once and its time is
// the broker's.
package main

import (
	"bytes"
	"encoding/base64"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func errorsScenario([]string) doc {
	client := newClient(connectionString(), nil)
	defer client.Close(background)
	checks := map[string]func(*azservicebus.Client) doc{
		"notFound": entityNotFound, "unauthorized": wrongKey, "size": tooLarge,
		"sessions": sessionCannotBeLocked, "locks": locks, "sessionLock": sessionLockLost,
	}
	result, mu, wg := doc{}, sync.Mutex{}, sync.WaitGroup{}
	for name, check := range checks { // at once: the lock check waits out a lock
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcome := check(client)
			mu.Lock()
			result[name] = outcome
			mu.Unlock()
		}()
	}
	wg.Wait()
	return result
}

func entityNotFound(client *azservicebus.Client) doc {
	s := sender(client, "no-such-queue")
	send := timed(func() error { return s.SendMessage(background, text("x"), nil) })
	r := receiver(client, "no-such-queue", nil)
	receive := timed(func() error {
		ctx, cancel := within(10)
		defer cancel()
		_, err := r.ReceiveMessages(ctx, 1, nil)
		return err
	})
	peek := timed(func() error { _, err := r.PeekMessages(background, 1, nil); return err })
	return doc{"send": send, "receive": receive, "peek": peek}
}

func wrongKey(*azservicebus.Client) doc {
	wrong := newClient(withKey(connectionString(), base64.StdEncoding.EncodeToString([]byte("not the key"))), nil)
	defer wrong.Close(background)
	s := sender(wrong, "errors")
	send := timed(func() error { return s.SendMessage(background, text("x"), nil) })
	r := receiver(wrong, "errors", nil)
	peek := timed(func() error { _, err := r.PeekMessages(background, 1, nil); return err })
	return doc{"send": send, "peek": peek}
}

func tooLarge(client *azservicebus.Client) doc {
	s := sender(client, "errors")
	big := timed(func() error {
		return s.SendMessage(background, &azservicebus.Message{Body: bytes.Repeat([]byte{1}, 300*1024)}, nil)
	})
	batch := mustGet(s.NewMessageBatch(background, nil))
	fitsBatch := batch.AddMessage(&azservicebus.Message{Body: bytes.Repeat([]byte{1}, 300*1024)}, nil)
	// A batch the client sizes bigger than the link allows: the broker refuses it whole.
	oversized := mustGet(s.NewMessageBatch(background, &azservicebus.MessageBatchOptions{MaxBytes: 1024 * 1024}))
	for i := 0; i < 3; i++ {
		must(oversized.AddMessage(&azservicebus.Message{Body: bytes.Repeat([]byte{1}, 100*1024)}, nil))
	}
	list := timed(func() error { return s.SendMessageBatch(background, oversized, nil) })
	after := s.SendMessage(background, text("still serving"), nil)
	must(s.Close(background))
	r := receiver(client, "errors", receiveAndDelete)
	left := receiveAll(r, 1, 2*time.Second)
	must(r.Close(background))
	return doc{"big": big, "fitsBatch": describeError(fitsBatch), "list": list, "afterError": describeError(after),
		"after": bodies(left)}
}

func sessionCannotBeLocked(client *azservicebus.Client) doc {
	s := sender(client, "error-sessions")
	must(s.SendMessage(background, inSession("s", "held"), nil))
	must(s.Close(background))
	holder := mustGet(client.AcceptSessionForQueue(background, "error-sessions", "held", nil))
	second := timed(func() error {
		_, err := client.AcceptSessionForQueue(background, "error-sessions", "held", nil)
		return err
	})
	must(holder.Close(background))
	return doc{"second": second}
}

// One message's lock runs out (lock duration 5 s) while another's is renewed half-way: settling the first
// fails with the SDK's lock-lost code, the renewed one completes; renewing the lost one fails the same way.
func locks(client *azservicebus.Client) doc {
	s := sender(client, "locks")
	must(s.SendMessage(background, withID("expires", "expires"), nil))
	must(s.SendMessage(background, withID("renewed", "renewed"), nil))
	must(s.Close(background))
	r := receiver(client, "locks", nil)
	messages := receiveAll(r, 2, 3*time.Second)
	got := byBody(messages)
	lockedUntil := *got["renewed"].LockedUntil
	time.Sleep(3 * time.Second)
	must(r.RenewMessageLock(background, got["renewed"], nil))
	renewedUntil := *got["renewed"].LockedUntil
	time.Sleep(3 * time.Second)
	lost := timed(func() error { return r.CompleteMessage(background, got["expires"], nil) })
	renewLost := r.RenewMessageLock(background, got["expires"], nil)
	renewedComplete := r.CompleteMessage(background, got["renewed"], nil)
	must(r.Close(background))
	return doc{"count": len(messages), "lockedUntil": timestamp(&lockedUntil), "renewedUntil": timestamp(&renewedUntil),
		"lost": lost, "renewLost": describeError(renewLost), "renewedComplete": describeError(renewedComplete)}
}

// A session whose lock (5 s) runs out unrenewed: the broker detaches its receiver, so renewing the session
// and settling its message fail (the SDK retries a settlement whose lock is lost for up to ~45 s: the 2 s
// context ends that), and the session can be accepted again with the message counted as delivered once more.
func sessionLockLost(client *azservicebus.Client) doc {
	s := sender(client, "session-locks")
	must(s.SendMessage(background, inSession("held too long", "slow"), nil))
	must(s.Close(background))
	session := mustGet(client.AcceptSessionForQueue(background, "session-locks", "slow", nil))
	got := receiveAll(session, 1, 3*time.Second)
	time.Sleep(6 * time.Second)
	renew := session.RenewSessionLock(background, nil)
	ctx, cancel := within(2)
	complete := session.CompleteMessage(ctx, got[0], nil)
	cancel()
	_ = session.Close(background)
	again := mustGet(client.AcceptSessionForQueue(background, "session-locks", "slow", nil))
	redelivered := receiveAndComplete(again, 1, 3*time.Second)
	must(again.Close(background))
	return doc{"complete": describeError(complete), "renew": describeError(renew),
		"redelivered": receivedAll(redelivered)}
}
