// Key Vault Secrets User on the app's Key Vault for the Function App's identity: the app settings that refer
// to the Event Hubs connection strings (@Microsoft.KeyVault(SecretUri=...)) are resolved with it.

param keyVaultName string
param principalId string

var keyVaultSecretsUser = '4633458b-17de-408a-b874-0445c86b69e6'

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

resource secretsUserRole 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(keyVault.id, principalId, keyVaultSecretsUser)
  scope: keyVault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', keyVaultSecretsUser)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}
