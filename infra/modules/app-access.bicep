// What the Function App's identity needs besides Service Bus, each at the narrowest scope that works:
// Storage Blob Data Owner on its host storage (AzureWebJobsStorage and the Flex Consumption deployment
// package), Storage Blob Data Contributor on the audit container only, Monitoring Metrics Publisher on
// Application Insights (keyless telemetry). Optionally an operator reads the audit logs and, on Elastic
// Premium, uploads the app package (Flex Consumption deployments go through the platform instead).

param principalId string
param functionsAccountName string
param auditAccountName string
param auditContainerName string
param applicationInsightsName string
param operatorPrincipalId string
param operatorPrincipalType string
param hosting string
param deploymentContainerName string

var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageBlobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
var storageBlobDataReader = '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

resource functionsAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: functionsAccountName
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  name: '${functionsAccountName}/default/${deploymentContainerName}'
}

resource auditContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  name: '${auditAccountName}/default/${auditContainerName}'
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource hostStorageRole 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(functionsAccount.id, principalId, storageBlobDataOwner)
  scope: functionsAccount
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource auditWriterRole 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(auditContainer.id, principalId, storageBlobDataContributor)
  scope: auditContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource telemetryRole 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, principalId, monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource auditReaderRole 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(operatorPrincipalId)) {
  name: guid(auditContainer.id, operatorPrincipalId, storageBlobDataReader)
  scope: auditContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataReader)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}

resource packageUploaderRole 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (hosting == 'premium' && !empty(operatorPrincipalId)) {
  name: guid(deploymentContainer.id, operatorPrincipalId, storageBlobDataContributor)
  scope: deploymentContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}
