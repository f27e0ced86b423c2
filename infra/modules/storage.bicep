// Two storage accounts, both without shared keys: the Functions host's own (AzureWebJobsStorage and the
// Flex Consumption deployment package) and the audit logs that `sbfed reconcile` reads. Kept apart so the
// app's broad rights on its host storage never reach the audit records.

param functionsAccountName string
param auditAccountName string
param auditContainerName string
param location string
param tags object

var deploymentContainerName = 'app-package'

var accountProperties = {
  allowSharedKeyAccess: false
  allowBlobPublicAccess: false
  minimumTlsVersion: 'TLS1_2'
  supportsHttpsTrafficOnly: true
  defaultToOAuthAuthentication: true
}

resource functionsAccount 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: functionsAccountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: accountProperties
}

resource functionsBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: functionsAccount
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: functionsBlobs
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource auditAccount 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: auditAccountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: accountProperties
}

resource auditBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: auditAccount
  name: 'default'
}

resource auditContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: auditBlobs
  name: auditContainerName
  properties: {
    publicAccess: 'None'
  }
}

output functionsAccountName string = functionsAccount.name
output auditAccountName string = auditAccount.name
output deploymentContainerName string = deploymentContainer.name
output deploymentContainerUrl string = '${functionsAccount.properties.primaryEndpoints.blob}${deploymentContainer.name}'
output auditSink string = '${auditAccount.properties.primaryEndpoints.blob}${auditContainer.name}'
