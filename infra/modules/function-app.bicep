// The Function App that runs sbfed's function_app.py: Linux, Python, system-assigned managed identity.
// Both plans run the app from a package in a blob container that the identity reads: Flex Consumption
// (default) through functionAppConfig, Elastic Premium through WEBSITE_RUN_FROM_PACKAGE (a keyless Premium
// app cannot use the Azure Files content share, which needs an account key). Every connection is
// identity-based: no keys, no connection strings but Application Insights' (which carries no secret: its
// local auth is disabled).

param name string
param planName string
param location string
param tags object

@allowed([
  'flex'
  'premium'
])
param hosting string

param pythonVersion string
param maximumInstanceCount int
param instanceMemoryMB int

@description('Host storage account (AzureWebJobsStorage through the identity).')
param storageAccountName string

@description('Blob container URL of the deployment package.')
param deploymentContainerUrl string

param applicationInsightsName string

@description('Path of the topology file inside the app (SBFED_TOPOLOGY).')
param topologyFile string

@description('Blob container URL the audit tasks write to (SBFED_AUDIT_SINK).')
param auditSink string

@description('[{setting, fullyQualifiedNamespace}] for every connection setting the tasks name.')
param connections array

@description('[{setting, bootstrapServers, secretUri}] for every Kafka connection setting (stream-to-queue tasks).')
param kafkaConnections array = []

var isFlex = hosting == 'flex'
// Elastic Premium runs this blob; publishing uploads it and restarts the app (docs/deploy-azure.md).
var premiumPackageUrl = '${deploymentContainerUrl}/sbfed.zip'

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: isFlex ? 'functionapp' : 'elastic'
  sku: isFlex ? {
    name: 'FC1'
    tier: 'FlexConsumption'
  } : {
    name: 'EP1'
    tier: 'ElasticPremium'
  }
  properties: {
    reserved: true
    maximumElasticWorkerCount: isFlex ? null : 20
  }
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, {
    'azd-service-name': 'replicator'
  })
  kind: 'functionapp,linux'
  identity: {
    type: 'SystemAssigned'
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      linuxFxVersion: isFlex ? null : 'Python|${pythonVersion}'
    }
    functionAppConfig: isFlex ? {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'SystemAssignedIdentity'
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'python'
        version: pythonVersion
      }
    } : null
  }
}

// Publishing with FTP or SCM basic credentials is off; azd deploys with Microsoft Entra ID.
resource ftpCredentials 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmCredentials 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'scm'
  properties: {
    allow: false
  }
}

var commonSettings = {
  AzureWebJobsStorage__accountName: storageAccountName
  AzureWebJobsStorage__credential: 'managedidentity'
  APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsights.properties.ConnectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'Authorization=AAD'
  SBFED_TOPOLOGY: topologyFile
  SBFED_AUDIT_SINK: auditSink
}

// Flex Consumption takes the runtime and the package from functionAppConfig and rejects these settings.
var premiumSettings = isFlex ? {} : {
  FUNCTIONS_EXTENSION_VERSION: '~4'
  FUNCTIONS_WORKER_RUNTIME: 'python'
  WEBSITE_RUN_FROM_PACKAGE: premiumPackageUrl
  WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID: 'SystemAssigned'
}

// <Setting>__fullyQualifiedNamespace makes the Service Bus trigger (and the SDK clients) use the identity.
var namespaceSettings = toObject(connections, c => '${c.setting}__fullyQualifiedNamespace', c => c.fullyQualifiedNamespace)
var credentialSettings = toObject(connections, c => '${c.setting}__credential', c => 'managedidentity')

// A Kafka trigger reads <Setting> as its bootstrap servers and signs in with <Setting>__password, a Key Vault
// reference the app resolves with its identity (replicators/app.py).
var kafkaServerSettings = toObject(kafkaConnections, c => c.setting, c => c.bootstrapServers)
var kafkaPasswordSettings = toObject(kafkaConnections, c => '${c.setting}__password', c => '@Microsoft.KeyVault(SecretUri=${c.secretUri})')

resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: site
  name: 'appsettings'
  properties: union(commonSettings, premiumSettings, namespaceSettings, credentialSettings, kafkaServerSettings, kafkaPasswordSettings)
}

output name string = site.name
output principalId string = site.identity.principalId
output packageUrl string = isFlex ? '' : premiumPackageUrl
