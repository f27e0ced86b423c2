// The Go SDK as a client with no emulator mode uses the broker: the connection string in Azure's form with
// the AMQPS port, TLS trusting the broker's certificate (a tls.Config whose only root is SB_CERT_PATH),
// over AMQPS or, with `websocket` as the argument, over WebSockets (ClientOptions.NewWebSocketConn with
// coder/websocket, dialing the broker's WebSocket port). Sends, receives and settles, reads the dead-letter
// queue, peeks, schedules and cancels, renews a lock, uses a session and its state, and tries a wrong key.
package main

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"
)

func tlsOptions(transport string) *azservicebus.ClientOptions {
	// go-amqp names the server by the endpoint's host:port unless told: the certificate names the host
	config := trustingBroker()
	config.ServerName = mustGet(url.Parse(strings.TrimPrefix(strings.Split(connectionString(), ";")[0], "Endpoint="))).Hostname()
	options := &azservicebus.ClientOptions{RetryOptions: noRetry, TLSConfig: config}
	if transport == "websocket" {
		options.NewWebSocketConn = dialWebSocket
	}
	return options
}

// The SDK asks for wss://<namespace>/$servicebus/websocket; the broker serves WebSockets on a port of its own.
func dialWebSocket(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
	address := mustGet(url.Parse(args.Host))
	address.Host = net.JoinHostPort(address.Hostname(), required("SB_WEBSOCKET_PORT"))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: trustingBroker()}}
	conn, _, err := websocket.Dial(ctx, address.String(), &websocket.DialOptions{
		Subprotocols: []string{"amqp"}, HTTPClient: client})
	if err != nil {
		return nil, err
	}
	return websocket.NetConn(context.Background(), conn, websocket.MessageBinary), nil
}

func overTLS(args []string) doc {
	transport := args[0]
	client := newClient(connectionString(), tlsOptions(transport))
	defer client.Close(background)
	return doc{
		"transport":  transport,
		"settle":     settleOverTLS(client, "settle"),
		"management": managementOverTLS(client, "q"),
		"session":    sessionOverTLS(client, "sessions"),
		"wrongKey":   wrongKeyOverTLS(transport),
	}
}

func settleOverTLS(client *azservicebus.Client, queue string) doc {
	s := sender(client, queue)
	for _, id := range []string{"0", "1", "2"} {
		must(s.SendMessage(background, withID("message "+id, id), nil))
	}
	r := receiver(client, queue, nil)
	got := receiveAll(r, 3, 5*time.Second)
	byID := map[string]*azservicebus.ReceivedMessage{}
	ids := []string{}
	for _, m := range got {
		byID[m.MessageID] = m
		ids = append(ids, m.MessageID)
	}
	must(r.CompleteMessage(background, byID["0"], nil))
	must(r.DeadLetterMessage(background, byID["1"], &azservicebus.DeadLetterOptions{Reason: ptr("bad"), ErrorDescription: ptr("tested")}))
	must(r.AbandonMessage(background, byID["2"], nil))
	again := receiveAll(r, 1, 5*time.Second)[0]
	must(r.CompleteMessage(background, again, nil))
	dlq := receiver(client, queue, deadLetterQueue)
	dead := receiveAll(dlq, 1, 5*time.Second)[0]
	must(dlq.CompleteMessage(background, dead, nil))
	return doc{"received": ids, "again": doc{"messageId": again.MessageID, "deliveryCount": again.DeliveryCount},
		"dead": doc{"messageId": dead.MessageID, "reason": dead.DeadLetterReason}}
}

func managementOverTLS(client *azservicebus.Client, queue string) doc {
	s := sender(client, queue)
	scheduled := mustGet(s.ScheduleMessages(background, []*azservicebus.Message{text("later")}, time.Now().Add(time.Hour), nil))
	must(s.CancelScheduledMessages(background, scheduled, nil))
	must(s.SendMessage(background, text("peeked"), nil))
	r := receiver(client, queue, nil)
	peeked := mustGet(r.PeekMessages(background, 10, nil))
	message := receiveAll(r, 1, 5*time.Second)[0]
	before := *message.LockedUntil
	time.Sleep(50 * time.Millisecond)
	must(r.RenewMessageLock(background, message, nil))
	must(r.CompleteMessage(background, message, nil))
	left := mustGet(r.PeekMessages(background, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))}))
	return doc{"peeked": bodies(peeked), "renewed": message.LockedUntil.After(before), "left": len(left)}
}

func sessionOverTLS(client *azservicebus.Client, queue string) doc {
	s := sender(client, queue)
	must(s.SendMessage(background, inSession("0", "go"), nil))
	must(s.SendMessage(background, inSession("1", "go"), nil))
	r := mustGet(client.AcceptSessionForQueue(background, queue, "go", nil))
	must(r.SetSessionState(background, []byte("halfway"), nil))
	state := mustGet(r.GetSessionState(background, nil))
	got := receiveAndComplete(r, 2, 5*time.Second)
	return doc{"state": string(state), "bodies": bodies(got)}
}

func wrongKeyOverTLS(transport string) doc {
	wrong := newClient(withKey(connectionString(), "bm90IHRoZSBrZXk="), tlsOptions(transport))
	defer wrong.Close(background)
	return describeError(sender(wrong, "q").SendMessage(background, text("never"), nil))
}
