// One Kafka cluster of the topology as an Event Hubs namespace: its topics as event hubs with their partition
// counts, read by stream-to-queue tasks through the namespace's Kafka endpoint (Standard tier and above).
// The Functions Kafka trigger signs in to that endpoint with a connection string (it has no managed-identity
// sign-in to Event Hubs): a Listen-only rule's connection string goes into the app's Key Vault, and the app
// setting refers to it; it is the app's one secret. Rendered from the topology's `kafka` section by
// `sbfed infra params`.

@description('Azure name of the namespace (globally unique).')
param name string

@description('The rendered cluster: {name, location, hubs: [{name, partitions}]}.')
param cluster object

@description('The Key Vault that keeps the Listen rule\'s connection string.')
param keyVaultName string

param tags object

resource eventHubsNamespace 'Microsoft.EventHub/namespaces@2024-01-01' = {
  name: name
  location: cluster.location
  tags: tags
  sku: {
    name: 'Standard'
    tier: 'Standard'
    capacity: 1
  }
  properties: {
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
  }
}

resource hubs 'Microsoft.EventHub/namespaces/eventhubs@2024-01-01' = [for hub in cluster.hubs: {
  parent: eventHubsNamespace
  name: hub.name
  properties: {
    partitionCount: hub.partitions
  }
}]

resource listenRule 'Microsoft.EventHub/namespaces/authorizationRules@2024-01-01' = {
  parent: eventHubsNamespace
  name: 'sbfed-kafka-listen'
  properties: {
    rights: [
      'Listen'
    ]
  }
}

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

resource connectionString 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: keyVault
  name: 'kafka-${cluster.name}'
  properties: {
    value: listKeys(listenRule.id, listenRule.apiVersion).primaryConnectionString
  }
}

// The Kafka endpoint of the namespace: its host name on port 9093.
output bootstrapServers string = '${eventHubsNamespace.name}.servicebus.windows.net:9093'
output connectionStringSecretUri string = connectionString.properties.secretUri
