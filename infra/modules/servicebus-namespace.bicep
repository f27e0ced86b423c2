// One Service Bus namespace with its queues, topics, subscriptions and rules, as rendered by
// `sbfed infra params` (properties already in ARM form). Local (SAS key) auth is disabled: every client,
// the Function App included, authenticates with Microsoft Entra ID.
//
// Order matters for auto-forwarding: topics first, then queues one at a time in the rendered order (a
// forward target precedes the queue forwarding to it), then subscriptions, which may forward to either.

@description('Azure name of the namespace (globally unique).')
param name string

@description('The rendered namespace: {name, location, sku, geoDataReplication, queues, topics, roleAssignments}.')
param namespace object

param tags object

// 2023-01-01-preview: the API version that carries geoDataReplication (Geo-Replication, Premium); null for a
// namespace in one region. Its children keep 2024-01-01.
resource serviceBusNamespace 'Microsoft.ServiceBus/namespaces@2023-01-01-preview' = {
  name: name
  location: namespace.location
  tags: tags
  sku: {
    name: namespace.sku
    tier: namespace.sku
    capacity: namespace.sku == 'Premium' ? 1 : null
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
    geoDataReplication: namespace.geoDataReplication
  }
}

resource topics 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' = [for topic in namespace.topics: {
  parent: serviceBusNamespace
  name: topic.name
  properties: topic.properties
}]

@batchSize(1)
resource queues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = [for queue in namespace.queues: {
  parent: serviceBusNamespace
  name: queue.name
  properties: queue.properties
  dependsOn: [
    topics
  ]
}]

module subscriptions 'servicebus-topic-subscriptions.bicep' = [for topic in namespace.topics: {
  name: 'sbfed-${uniqueString(name, topic.name)}'
  params: {
    namespaceName: serviceBusNamespace.name
    topicName: topic.name
    subscriptions: topic.subscriptions
  }
  dependsOn: [
    topics
    queues
  ]
}]

output name string = serviceBusNamespace.name
// 'https://<name>.servicebus.windows.net:443/' -> '<name>.servicebus.windows.net' (any Azure cloud).
output fullyQualifiedNamespace string = split(replace(serviceBusNamespace.properties.serviceBusEndpoint, 'https://', ''), ':')[0]
