// sbfed on Azure: Service Bus namespaces in several regions with the pattern's entities and rules, the
// replication Function App (system-assigned identity, no keys anywhere), least-privilege role assignments,
// audit-log storage and Application Insights.
//
// The topology-derived parameters (namespaces, connections) are rendered from the topology file by
// `sbfed infra params`; azd runs it in the preprovision hook (azure.yaml). Do not edit them by hand.
targetScope = 'subscription'

@minLength(1)
@maxLength(40)
@description('Deployment name (the azd environment): names the resource group and seeds resource names.')
param namePrefix string

@minLength(1)
@description('Region of the Function App, its storage, the audit storage and Application Insights.')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Service Bus namespaces from the topology file: [{name, location, sku, geoDataReplication, queues, topics, roleAssignments}].')
param namespaces array

@description('Connection settings the tasks name: [{setting, namespace}]. Each becomes <setting>__fullyQualifiedNamespace.')
param connections array

@description('Kafka clusters of the topology as Event Hubs namespaces: [{name, location, hubs: [{name, partitions}]}].')
param eventHubs array = []

@description('Connection settings of stream-to-queue tasks: [{setting, cluster}]. Each becomes <setting> (the Kafka endpoint) and <setting>__password (a Key Vault reference).')
param kafkaConnections array = []

@description('Path of the topology file inside the deployed app; the app reads its tasks from it (SBFED_TOPOLOGY).')
param topologyFile string

@description('Function App hosting: Flex Consumption (default) or Elastic Premium.')
@allowed([
  'flex'
  'premium'
])
param hosting string = 'flex'

@description('Entra object id given read access to the audit logs (for reconciliation); empty for none.')
param operatorPrincipalId string = ''

@description('Kind of principal operatorPrincipalId is.')
@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param operatorPrincipalType string = 'User'

@description('Resource group name; default rg-<namePrefix>.')
param resourceGroupName string = ''

@description('Flex Consumption: most instances the app scales out to.')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Flex Consumption: memory per instance.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Blob container of the audit logs.')
param auditContainerName string = 'audit'

// The project runs on Python 3.11 (pyproject.toml).
var pythonVersion = '3.11'
var resourceToken = toLower(uniqueString(subscription().id, namePrefix, location))
var tags = {
  'azd-env-name': namePrefix
  application: 'sbfed'
}
var namespaceNames = [for ns in namespaces: ns.name]
var clusterNames = [for eh in eventHubs: eh.name]
var keyVaultName = 'kv-${take(resourceToken, 21)}'


resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: empty(resourceGroupName) ? 'rg-${namePrefix}' : resourceGroupName
  location: location
  tags: tags
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'sbfed-monitoring'
  scope: rg
  params: {
    workspaceName: 'log-${resourceToken}'
    applicationInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
  }
}

module storage 'modules/storage.bicep' = {
  name: 'sbfed-storage'
  scope: rg
  params: {
    functionsAccountName: 'stfn${resourceToken}'
    auditAccountName: 'staudit${resourceToken}'
    auditContainerName: auditContainerName
    location: location
    tags: tags
  }
}

module serviceBus 'modules/servicebus-namespace.bicep' = [for ns in namespaces: {
  name: 'sbfed-ns-${ns.name}'
  scope: rg
  params: {
    name: 'sb-${toLower(ns.name)}-${resourceToken}'
    namespace: ns
    tags: tags
  }
}]

module keyVault 'modules/key-vault.bicep' = if (!empty(eventHubs)) {
  name: 'sbfed-key-vault'
  scope: rg
  params: {
    name: keyVaultName
    location: location
    tags: tags
  }
}

module eventHubsNamespace 'modules/eventhubs-namespace.bicep' = [for eh in eventHubs: {
  name: 'sbfed-eh-${eh.name}'
  scope: rg
  dependsOn: [
    keyVault
  ]
  params: {
    name: 'evhns-${toLower(eh.name)}-${resourceToken}'
    cluster: eh
    keyVaultName: keyVaultName
    tags: tags
  }
}]

module functionApp 'modules/function-app.bicep' = {
  name: 'sbfed-app'
  scope: rg
  params: {
    name: 'func-${resourceToken}'
    planName: 'plan-${resourceToken}'
    location: location
    tags: tags
    hosting: hosting
    pythonVersion: pythonVersion
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    storageAccountName: storage.outputs.functionsAccountName
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    topologyFile: topologyFile
    auditSink: storage.outputs.auditSink
    connections: [for c in connections: {
      setting: c.setting
      fullyQualifiedNamespace: serviceBus[indexOf(namespaceNames, c.namespace)].outputs.fullyQualifiedNamespace
    }]
    kafkaConnections: [for k in kafkaConnections: {
      setting: k.setting
      bootstrapServers: eventHubsNamespace[indexOf(clusterNames, k.cluster)].outputs.bootstrapServers
      secretUri: eventHubsNamespace[indexOf(clusterNames, k.cluster)].outputs.connectionStringSecretUri
    }]
  }
}

module keyVaultAccess 'modules/key-vault-access.bicep' = if (!empty(eventHubs)) {
  name: 'sbfed-key-vault-access'
  scope: rg
  dependsOn: [
    keyVault
  ]
  params: {
    keyVaultName: keyVaultName
    principalId: functionApp.outputs.principalId
  }
}

module serviceBusAccess 'modules/servicebus-access.bicep' = [for (ns, i) in namespaces: {
  name: 'sbfed-access-${ns.name}'
  scope: rg
  params: {
    namespaceName: serviceBus[i].outputs.name
    principalId: functionApp.outputs.principalId
    assignments: ns.roleAssignments
  }
}]

module appAccess 'modules/app-access.bicep' = {
  name: 'sbfed-app-access'
  scope: rg
  params: {
    principalId: functionApp.outputs.principalId
    functionsAccountName: storage.outputs.functionsAccountName
    auditAccountName: storage.outputs.auditAccountName
    auditContainerName: auditContainerName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    operatorPrincipalId: operatorPrincipalId
    operatorPrincipalType: operatorPrincipalType
    hosting: hosting
    deploymentContainerName: storage.outputs.deploymentContainerName
  }
}

// azd stores these in the environment (`azd env get-values`).
output AZURE_LOCATION string = location
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output SBFED_HOST_STORAGE_ACCOUNT string = storage.outputs.functionsAccountName
output SBFED_PACKAGE_URL string = functionApp.outputs.packageUrl
output SBFED_AUDIT_ACCOUNT string = storage.outputs.auditAccountName
output SBFED_AUDIT_CONTAINER string = auditContainerName
output SBFED_AUDIT_SINK string = storage.outputs.auditSink
output SBFED_NAMESPACES array = [for (ns, i) in namespaces: {
  name: ns.name
  azureName: serviceBus[i].outputs.name
  fullyQualifiedNamespace: serviceBus[i].outputs.fullyQualifiedNamespace
}]
