// Topics with the Go SDK: SQL and correlation filters, rule actions, rules the admin package replaces on a
// live subscription (the Go SDK has no rule manager on its data plane), and autoforwarding (see
// test_go_topics.py).
package main

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

func topics([]string) doc {
	client := newClient(connectionString(), nil)
	defer client.Close(background)
	return doc{"filters": filtersAndActions(client), "managed": rulesManaged(client),
		"sessionSubscription": sessionSubscription(client), "chain": autoforwardChain(client)}
}

func order(body, id, subject string, properties map[string]any) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(body), MessageID: ptr(id), Subject: ptr(subject),
		ApplicationProperties: properties}
}

// What reached an entity: `expected` messages, then a short look for any more.
func drain(client *azservicebus.Client, expected int, entity ...string) []doc {
	var r *azservicebus.Receiver
	if len(entity) == 2 {
		r = mustGet(client.NewReceiverForSubscription(entity[0], entity[1], receiveAndDelete))
	} else {
		r = receiver(client, entity[0], receiveAndDelete)
	}
	messages := receiveAll(r, expected, 3*time.Second)
	messages = append(messages, receiveWithin(r, 10, 300*time.Millisecond)...)
	must(r.Close(background))
	return receivedAll(messages)
}

func filtersAndActions(client *azservicebus.Client) doc {
	s := sender(client, "orders")
	batch := mustGet(s.NewMessageBatch(background, nil))
	must(batch.AddMessage(order("red-big", "o1", "order", map[string]any{"color": "red", "quantity": int64(12)}), nil))
	must(batch.AddMessage(order("red-small", "o2", "order", map[string]any{"color": "red", "quantity": int64(1)}), nil))
	must(batch.AddMessage(order("blue", "o3", "refund", map[string]any{"color": "blue", "quantity": int64(50)}), nil))
	must(s.SendMessageBatch(background, batch, nil))
	must(s.Close(background))
	return doc{
		"all": drain(client, 3, "orders", "all"), "red": drain(client, 2, "orders", "red"),
		"big": drain(client, 1, "orders", "big"), "refundsForwarded": drain(client, 1, "refunds"),
	}
}

// The "live" subscription's $Default rule replaced through the admin package by a correlation filter on
// a property and a SQL filter with an action; then messages select by the new rules.
func rulesManaged(client *azservicebus.Client) doc {
	manager := newAdmin(adminConnectionString())
	before := drain(client, 3, "orders", "live") // what $Default let through from filtersAndActions
	mustGet(manager.DeleteRule(background, "orders", "live", "$Default", nil))
	mustGet(manager.CreateRule(background, "orders", "live", &admin.CreateRuleOptions{
		Name: ptr("vip"), Filter: &admin.CorrelationFilter{ApplicationProperties: map[string]any{"tier": "vip"}}}))
	mustGet(manager.CreateRule(background, "orders", "live", &admin.CreateRuleOptions{
		Name:   ptr("bulk"),
		Filter: &admin.SQLFilter{Expression: "quantity >= @min", Parameters: map[string]any{"@min": int64(100)}},
		Action: &admin.SQLAction{Expression: "SET bulk = true; SET sys.Subject = 'bulk-order'"}}))
	s := sender(client, "orders")
	must(s.SendMessage(background, order("vip-small", "v1", "order", map[string]any{"tier": "vip", "quantity": int64(1)}), nil))
	must(s.SendMessage(background, order("plain-bulk", "v2", "order", map[string]any{"tier": "std", "quantity": int64(500)}), nil))
	must(s.SendMessage(background, order("plain-small", "v3", "order", map[string]any{"tier": "std", "quantity": int64(2)}), nil))
	must(s.Close(background))
	names := []string{}
	pager := manager.NewListRulesPager("orders", "live", nil)
	for pager.More() {
		for _, rule := range mustGet(pager.NextPage(background)).Rules {
			names = append(names, rule.Name)
		}
	}
	// The other subscriptions get these too: drained so the next checks start empty.
	drain(client, 3, "orders", "all")
	return doc{"before": before, "rules": names, "received": drain(client, 2, "orders", "live")}
}

func autoforwardChain(client *azservicebus.Client) doc {
	s := sender(client, "chain-start")
	must(s.SendMessage(background, withID("hop-1", "h1"), nil))
	must(s.SendMessage(background, withID("hop-2", "h2"), nil))
	must(s.Close(background))
	return doc{"end": drain(client, 2, "chain-end")}
}

// A session subscription: a named session accepted on it, one message dead-lettered to the subscription's
// dead-letter queue and read back there.
func sessionSubscription(client *azservicebus.Client) doc {
	s := sender(client, "orders")
	for _, b := range []string{"s1", "s2"} {
		must(s.SendMessage(background, &azservicebus.Message{Body: []byte(b), SessionID: ptr("tenant-1"),
			ApplicationProperties: map[string]any{"quantity": int64(0)}}, nil))
	}
	must(s.Close(background))
	drain(client, 2, "orders", "all")
	session := mustGet(client.AcceptSessionForSubscription(background, "orders", "by-tenant", "tenant-1", nil))
	got := receiveAll(session, 2, 3*time.Second)
	must(session.CompleteMessage(background, got[0], nil))
	must(session.DeadLetterMessage(background, got[1], &azservicebus.DeadLetterOptions{Reason: ptr("tenant-gone")}))
	must(session.Close(background))
	dlq := mustGet(client.NewReceiverForSubscription("orders", "by-tenant", deadLetterQueue))
	dead := receiveAndComplete(dlq, 1, 3*time.Second)
	must(dlq.Close(background))
	return doc{"received": bodies(got), "sessionIds": []any{got[0].SessionID, got[1].SessionID},
		"deadLettered": receivedAll(dead)}
}
