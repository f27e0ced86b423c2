// Least-privilege Service Bus roles for the Function App's identity on one namespace, each scoped to the
// one entity a task uses: Azure Service Bus Data Receiver on a source (the queue, or the topic subscription;
// the dead-letter queue is inside its entity's scope), Azure Service Bus Data Sender on a target queue or
// topic. A task whose transform may reroute copies gets Data Sender on the namespace instead.
// Rendered from the topology's tasks by `sbfed infra params`.

param namespaceName string
param principalId string

@description('[{role, entityType: namespace | queue | topic | subscription, queue?, topic?, subscription?}].')
param assignments array

var roleDefinitionIds = {
  'Azure Service Bus Data Receiver': '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
  'Azure Service Bus Data Sender': '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
}

var namespaceAssignments = filter(assignments, a => a.entityType == 'namespace')
var queueAssignments = filter(assignments, a => a.entityType == 'queue')
var topicAssignments = filter(assignments, a => a.entityType == 'topic')
var subscriptionAssignments = filter(assignments, a => a.entityType == 'subscription')

resource serviceBusNamespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource queues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = [for a in queueAssignments: {
  name: '${namespaceName}/${a.queue}'
}]

resource topics 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' existing = [for a in topicAssignments: {
  name: '${namespaceName}/${a.topic}'
}]

resource subscriptions 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' existing = [for a in subscriptionAssignments: {
  name: '${namespaceName}/${a.topic}/${a.subscription}'
}]

resource namespaceRoles 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for a in namespaceAssignments: {
  name: guid(serviceBusNamespace.id, principalId, roleDefinitionIds[a.role])
  scope: serviceBusNamespace
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionIds[a.role])
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

resource queueRoles 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (a, i) in queueAssignments: {
  name: guid(queues[i].id, principalId, roleDefinitionIds[a.role])
  scope: queues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionIds[a.role])
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

resource topicRoles 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (a, i) in topicAssignments: {
  name: guid(topics[i].id, principalId, roleDefinitionIds[a.role])
  scope: topics[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionIds[a.role])
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

resource subscriptionRoles 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (a, i) in subscriptionAssignments: {
  name: guid(subscriptions[i].id, principalId, roleDefinitionIds[a.role])
  scope: subscriptions[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionIds[a.role])
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]
