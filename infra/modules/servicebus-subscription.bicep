// One topic subscription and its rules. Rule properties arrive in ARM form (filterType, sqlFilter or
// correlationFilter, action). When the topology gives rules, the renderer also replaces the `$Default`
// rule Service Bus creates with every subscription by a filter that never matches, since ARM cannot delete it.

param namespaceName string
param topicName string

@description('Rendered subscription: {name, properties, rules: [{name, properties}]}.')
param subscription object

resource topic 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' existing = {
  name: '${namespaceName}/${topicName}'
}

resource topicSubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' = {
  parent: topic
  name: subscription.name
  properties: subscription.properties
}

resource rules 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2024-01-01' = [for rule in subscription.rules: {
  parent: topicSubscription
  name: rule.name
  properties: rule.properties
}]
