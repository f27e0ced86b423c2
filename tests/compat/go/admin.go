// The Go SDK's admin package (azservicebus/admin) on the namespace's management port: queues, topics,
// subscriptions and rules created, read, updated, listed (past one page) and deleted, runtime figures, and
// the errors it reports (*azcore.ResponseError with the HTTP status). See test_go_admin.py.
package main

import (
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Every item of every page of a pager, and the sizes of the pages.
func collect[Page, Item any](pager *runtime.Pager[Page], items func(Page) []Item) ([]Item, []int) {
	var all []Item
	var sizes []int
	for pager.More() {
		page := items(mustGet(pager.NextPage(background)))
		all = append(all, page...)
		sizes = append(sizes, len(page))
	}
	return all, sizes
}

func status(s admin.EntityStatus) *admin.EntityStatus { return &s }

func adminQueues(args []string) doc {
	busy := args[0]
	manager := newAdmin(adminConnectionString())
	options := admin.QueueProperties{
		LockDuration: ptr("PT45S"), MaxSizeInMegabytes: ptr(int32(2048)), RequiresDuplicateDetection: ptr(true),
		RequiresSession: ptr(false), DefaultMessageTimeToLive: ptr("P1D"), DeadLetteringOnMessageExpiration: ptr(true),
		DuplicateDetectionHistoryTimeWindow: ptr("PT5M"), MaxDeliveryCount: ptr(int32(4)),
		EnableBatchedOperations: ptr(false), UserMetadata: ptr("owner=billing"), AutoDeleteOnIdle: ptr("PT2H"),
		EnablePartitioning: ptr(true), ForwardTo: ptr("archive"), ForwardDeadLetteredMessagesTo: ptr("archive"),
	}
	result := doc{"namespace": outcome(manager.GetNamespaceProperties(background, nil))}
	result["createdArchive"] = outcome(manager.CreateQueue(background, "archive", nil))
	result["created"] = outcome(manager.CreateQueue(background, "orders", &admin.CreateQueueOptions{Properties: &options}))
	result["createdAgain"] = outcome(manager.CreateQueue(background, "orders", nil))
	result["fetched"] = outcome(manager.GetQueue(background, "orders", nil))

	queue := mustGet(manager.GetQueue(background, "orders", nil)).QueueProperties
	queue.MaxDeliveryCount = ptr(int32(7))
	queue.UserMetadata = ptr("owner=payments")
	queue.Status = status(admin.EntityStatusSendDisabled)
	queue.ForwardTo = nil
	result["updated"] = outcome(manager.UpdateQueue(background, "orders", queue, nil))
	result["refetched"] = outcome(manager.GetQueue(background, "orders", nil))

	result["runtime"] = outcome(manager.GetQueueRuntimeProperties(background, busy, nil))
	queues, _ := collect(manager.NewListQueuesPager(nil), func(p admin.ListQueuesResponse) []admin.QueueItem { return p.Queues })
	names := []string{}
	for _, q := range queues {
		names = append(names, q.QueueName)
	}
	result["listed"] = names
	runtimes, _ := collect(manager.NewListQueuesRuntimePropertiesPager(nil),
		func(p admin.ListQueuesRuntimePropertiesResponse) []admin.QueueRuntimePropertiesItem {
			return p.QueueRuntimeProperties
		})
	counts := [][]any{}
	for _, q := range runtimes {
		counts = append(counts, []any{q.QueueName, q.ActiveMessageCount})
	}
	result["listedRuntime"] = counts

	result["missing"] = doc{
		"get":     outcome(manager.GetQueue(background, "missing", nil)),
		"runtime": outcome(manager.GetQueueRuntimeProperties(background, "missing", nil)),
		"update":  outcome(manager.UpdateQueue(background, "missing", queue, nil)),
		"delete":  outcome(manager.DeleteQueue(background, "missing", nil)),
	}
	// Entity-level SAS rules are refused (not silently dropped): the namespace's policies authorize.
	reader := admin.AuthorizationRule{AccessRights: []admin.AccessRight{admin.AccessRightListen}, KeyName: ptr("reader"),
		PrimaryKey: ptr("cHJpbWFyeQ==")}
	result["authorizationRules"] = outcome(manager.CreateQueue(background, "guarded", &admin.CreateQueueOptions{
		Properties: &admin.QueueProperties{AuthorizationRules: []admin.AuthorizationRule{reader}}}))
	result["deleted"] = outcome(manager.DeleteQueue(background, "orders", nil))
	result["afterDelete"] = outcome(manager.GetQueue(background, "orders", nil))
	wrong := newAdmin(withKey(adminConnectionString(), "bm90LXRoZS1rZXk="))
	result["wrongKey"] = outcome(wrong.GetQueue(background, "archive", nil))
	return result
}

func adminTopics(args []string) doc {
	busyTopic, busySubscription := args[0], args[1]
	manager := newAdmin(adminConnectionString())
	result := doc{}
	mustGet(manager.CreateQueue(background, "sink", nil))
	topicOptions := admin.TopicProperties{
		MaxSizeInMegabytes: ptr(int32(2048)), RequiresDuplicateDetection: ptr(true), DefaultMessageTimeToLive: ptr("PT10H"),
		DuplicateDetectionHistoryTimeWindow: ptr("PT1M"), EnableBatchedOperations: ptr(false), SupportOrdering: ptr(false),
		EnablePartitioning: ptr(true), AutoDeleteOnIdle: ptr("PT3H"), UserMetadata: ptr("team=events"),
	}
	result["topic"] = outcome(manager.CreateTopic(background, "events", &admin.CreateTopicOptions{Properties: &topicOptions}))
	result["topicAgain"] = outcome(manager.CreateTopic(background, "events", nil))
	result["topicFetched"] = outcome(manager.GetTopic(background, "events", nil))
	topic := mustGet(manager.GetTopic(background, "events", nil)).TopicProperties
	topic.UserMetadata = ptr("team=payments")
	topic.Status = status(admin.EntityStatusSendDisabled)
	result["topicUpdated"] = outcome(manager.UpdateTopic(background, "events", topic, nil))

	subscriptionOptions := admin.SubscriptionProperties{
		LockDuration: ptr("PT20S"), RequiresSession: ptr(true), DefaultMessageTimeToLive: ptr("PT1H"),
		DeadLetteringOnMessageExpiration: ptr(true), EnableDeadLetteringOnFilterEvaluationExceptions: ptr(false),
		MaxDeliveryCount: ptr(int32(2)), EnableBatchedOperations: ptr(false), UserMetadata: ptr("to=secondary"),
		AutoDeleteOnIdle: ptr("PT4H"), ForwardDeadLetteredMessagesTo: ptr("sink"),
	}
	result["subscription"] = outcome(manager.CreateSubscription(background, "events", "audit",
		&admin.CreateSubscriptionOptions{Properties: &subscriptionOptions}))
	result["subscriptionAgain"] = outcome(manager.CreateSubscription(background, "events", "audit", nil))
	result["forwarding"] = outcome(manager.CreateSubscription(background, "events", "relay", &admin.CreateSubscriptionOptions{
		Properties: &admin.SubscriptionProperties{ForwardTo: ptr("sink"), DefaultRule: &admin.RuleProperties{
			Name: "orders-only", Filter: &admin.SQLFilter{Expression: "kind = 'order'"}}}}))
	result["relayRules"] = ruleNames(manager, "events", "relay")
	result["subscriptionFetched"] = outcome(manager.GetSubscription(background, "events", "audit", nil))
	subscription := mustGet(manager.GetSubscription(background, "events", "audit", nil)).SubscriptionProperties
	subscription.MaxDeliveryCount = ptr(int32(9))
	subscription.Status = status(admin.EntityStatusReceiveDisabled)
	subscription.ForwardDeadLetteredMessagesTo = nil
	result["subscriptionUpdated"] = outcome(manager.UpdateSubscription(background, "events", "audit", subscription, nil))
	result["subscriptionRefetched"] = outcome(manager.GetSubscription(background, "events", "audit", nil))

	result["topicRuntime"] = outcome(manager.GetTopicRuntimeProperties(background, busyTopic, nil))
	result["subscriptionRuntime"] = outcome(manager.GetSubscriptionRuntimeProperties(background, busyTopic, busySubscription, nil))
	topics, _ := collect(manager.NewListTopicsPager(nil), func(p admin.ListTopicsResponse) []admin.TopicItem { return p.Topics })
	names := []string{}
	for _, t := range topics {
		names = append(names, t.TopicName)
	}
	result["topics"] = names
	topicRuntimes, _ := collect(manager.NewListTopicsRuntimePropertiesPager(nil),
		func(p admin.ListTopicsRuntimePropertiesResponse) []admin.TopicRuntimePropertiesItem {
			return p.TopicRuntimeProperties
		})
	counts := [][]any{}
	for _, t := range topicRuntimes {
		counts = append(counts, []any{t.TopicName, t.SubscriptionCount})
	}
	result["topicsRuntime"] = counts
	subscriptions, _ := collect(manager.NewListSubscriptionsPager("events", nil),
		func(p admin.ListSubscriptionsResponse) []admin.SubscriptionPropertiesItem { return p.Subscriptions })
	pairs := [][]string{}
	for _, s := range subscriptions {
		pairs = append(pairs, []string{s.TopicName, s.SubscriptionName})
	}
	result["subscriptions"] = pairs
	subscriptionRuntimes, _ := collect(manager.NewListSubscriptionsRuntimePropertiesPager(busyTopic, nil),
		func(p admin.ListSubscriptionsRuntimePropertiesResponse) []admin.SubscriptionRuntimePropertiesItem {
			return p.SubscriptionRuntimeProperties
		})
	active := [][]any{}
	for _, s := range subscriptionRuntimes {
		active = append(active, []any{s.SubscriptionName, s.ActiveMessageCount})
	}
	result["subscriptionsRuntime"] = active

	result["missing"] = doc{
		"topic":                      outcome(manager.GetTopic(background, "missing", nil)),
		"subscription":               outcome(manager.GetSubscription(background, "events", "missing", nil)),
		"subscriptionOfMissingTopic": outcome(manager.GetSubscription(background, "missing", "audit", nil)),
		"deleteSubscription":         outcome(manager.DeleteSubscription(background, "events", "missing", nil)),
		"deleteTopic":                outcome(manager.DeleteTopic(background, "missing", nil)),
	}
	result["subscriptionDeleted"] = outcome(manager.DeleteSubscription(background, "events", "audit", nil))
	result["afterSubscriptionDelete"] = outcome(manager.GetSubscription(background, "events", "audit", nil))
	result["topicDeleted"] = outcome(manager.DeleteTopic(background, "events", nil))
	result["afterTopicDelete"] = outcome(manager.GetSubscription(background, "events", "relay", nil))
	return result
}

func ruleNames(manager *admin.Client, topic, subscription string) []string {
	rules, _ := collect(manager.NewListRulesPager(topic, subscription, nil),
		func(p admin.ListRulesResponse) []admin.RuleProperties { return p.Rules })
	names := []string{}
	for _, r := range rules {
		names = append(names, r.Name)
	}
	return names
}

// A rule as plain fields, its filter's and action's Go type named (the description Service Bus sent).
func rule(r *admin.RuleProperties) doc {
	if r == nil {
		return nil
	}
	var action any
	if r.Action != nil {
		action = doc{"type": fmt.Sprintf("%T", r.Action), "value": r.Action}
	}
	return doc{"name": r.Name, "filter": doc{"type": fmt.Sprintf("%T", r.Filter), "value": r.Filter}, "action": action}
}

func ruleOutcome[T any](response T, err error, properties func(T) *admin.RuleProperties) doc {
	if err != nil {
		return doc{"error": describeError(err)}
	}
	return doc{"value": rule(properties(response))}
}

func adminRules(args []string) doc {
	topic, subscription := args[0], args[1]
	manager := newAdmin(adminConnectionString())
	created := func(r admin.CreateRuleResponse) *admin.RuleProperties { return &r.RuleProperties }
	fetched := func(r *admin.GetRuleResponse) *admin.RuleProperties {
		if r == nil {
			return nil
		}
		return &r.RuleProperties
	}
	result := doc{}
	create := func(options admin.CreateRuleOptions) doc {
		response, err := manager.CreateRule(background, topic, subscription, &options)
		return ruleOutcome(response, err, created)
	}
	get := func(sub, name string) doc {
		response, err := manager.GetRule(background, topic, sub, name, nil)
		return ruleOutcome(response, err, fetched)
	}
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	result["sql"] = create(admin.CreateRuleOptions{Name: ptr("priced"),
		Filter: &admin.SQLFilter{Expression: "price > @limit AND region = @region",
			Parameters: map[string]any{"@limit": 10.5, "@region": "eu", "@count": int64(3)}},
		Action: &admin.SQLAction{Expression: "SET flagged = @flag", Parameters: map[string]any{"@flag": true}}})
	result["correlation"] = create(admin.CreateRuleOptions{Name: ptr("matched"), Filter: &admin.CorrelationFilter{
		CorrelationID: ptr("cid"), MessageID: ptr("mid"), To: ptr("to"), ReplyTo: ptr("rt"), Subject: ptr("lbl"),
		SessionID: ptr("sess"), ReplyToSessionID: ptr("rts"), ContentType: ptr("application/json"),
		ApplicationProperties: map[string]any{"k": "v", "n": int64(5), "on": true, "at": at, "ratio": 0.5}}})
	result["default"] = create(admin.CreateRuleOptions{Name: ptr("unfiltered")}) // no filter: a true filter
	result["again"] = create(admin.CreateRuleOptions{Name: ptr("priced"), Filter: &admin.TrueFilter{}})
	result["badSql"] = create(admin.CreateRuleOptions{Name: ptr("broken"), Filter: &admin.SQLFilter{Expression: "a = = 1"}})
	result["fetched"] = get(subscription, "priced")

	updated, err := manager.UpdateRule(background, topic, subscription, admin.RuleProperties{
		Name: "priced", Filter: &admin.SQLFilter{Expression: "price > 100"}})
	result["updated"] = ruleOutcome(updated, err, func(r admin.UpdateRuleResponse) *admin.RuleProperties { return &r.RuleProperties })
	result["refetched"] = get(subscription, "priced")

	rules, _ := collect(manager.NewListRulesPager(topic, subscription, nil),
		func(p admin.ListRulesResponse) []admin.RuleProperties { return p.Rules })
	listed := []doc{}
	for i := range rules {
		listed = append(listed, rule(&rules[i]))
	}
	result["listed"] = listed
	_, missingUpdate := manager.UpdateRule(background, topic, subscription, admin.RuleProperties{
		Name: "missing", Filter: &admin.TrueFilter{}})
	_, missingDelete := manager.DeleteRule(background, topic, subscription, "missing", nil)
	result["missing"] = doc{
		"get": get(subscription, "missing"), "ofMissingSubscription": get("missing", "priced"),
		"update": doc{"error": describeError(missingUpdate)}, "delete": doc{"error": describeError(missingDelete)},
	}
	result["deleted"] = outcome(manager.DeleteRule(background, topic, subscription, "matched", nil))
	result["afterDelete"] = get(subscription, "matched")
	return result
}

// Lists longer than one page (105 queues, 101 subscriptions, 101 rules, all made here): every entity once, in
// order, page by page.
func adminPaging(args []string) doc {
	topic, subscription := args[0], args[1]
	manager := newAdmin(adminConnectionString())
	for i := 0; i < 105; i++ {
		mustGet(manager.CreateQueue(background, fmt.Sprintf("q%03d", i), nil))
	}
	mustGet(manager.CreateTopic(background, topic, nil))
	for i := 0; i < 101; i++ {
		mustGet(manager.CreateSubscription(background, topic, fmt.Sprintf("s%03d", i), nil))
	}
	for i := 0; i < 101; i++ {
		mustGet(manager.CreateRule(background, topic, subscription, &admin.CreateRuleOptions{Name: ptr(fmt.Sprintf("r%03d", i))}))
	}
	queues, sizes := collect(manager.NewListQueuesPager(&admin.ListQueuesOptions{MaxPageSize: 40}),
		func(p admin.ListQueuesResponse) []admin.QueueItem { return p.Queues })
	queueNames := []string{}
	for _, q := range queues {
		queueNames = append(queueNames, q.QueueName)
	}
	allQueues, defaultSizes := collect(manager.NewListQueuesPager(nil),
		func(p admin.ListQueuesResponse) []admin.QueueItem { return p.Queues })
	runtimes, _ := collect(manager.NewListQueuesRuntimePropertiesPager(nil),
		func(p admin.ListQueuesRuntimePropertiesResponse) []admin.QueueRuntimePropertiesItem {
			return p.QueueRuntimeProperties
		})
	subscriptions, _ := collect(manager.NewListSubscriptionsPager(topic, nil),
		func(p admin.ListSubscriptionsResponse) []admin.SubscriptionPropertiesItem { return p.Subscriptions })
	subscriptionNames := []string{}
	for _, s := range subscriptions {
		subscriptionNames = append(subscriptionNames, s.SubscriptionName)
	}
	return doc{
		"queues": queueNames, "queuePageSizes": sizes, "allQueues": len(allQueues), "defaultPageSizes": defaultSizes,
		"queuesRuntime": len(runtimes), "subscriptions": subscriptionNames,
		"rules": ruleNames(manager, topic, subscription),
	}
}
