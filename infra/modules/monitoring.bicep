// Log Analytics workspace and workspace-based Application Insights. Local (instrumentation key) auth is
// off: the Function App sends telemetry with its managed identity (Monitoring Metrics Publisher).

param workspaceName string
param applicationInsightsName string
param location string
param tags object

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: workspaceName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

output applicationInsightsName string = applicationInsights.name
