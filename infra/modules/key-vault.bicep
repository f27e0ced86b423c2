// The app's Key Vault, for the one secret it needs: the Event Hubs connection string of a stream-to-queue
// task's Kafka trigger (eventhubs-namespace.bicep writes it). Access by Azure RBAC only
// (key-vault-access.bicep grants the app's identity Key Vault Secrets User).

param name string
param location string
param tags object

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    publicNetworkAccess: 'Enabled'
  }
}

output name string = keyVault.name
