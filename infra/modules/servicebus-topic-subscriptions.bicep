// The subscriptions of one topic. Each subscription is a module of its own because its rules are a
// loop inside the subscriptions loop, and Bicep does not nest resource loops.

param namespaceName string
param topicName string

@description('Rendered subscriptions: [{name, properties, rules}].')
param subscriptions array

module subscription 'servicebus-subscription.bicep' = [for sub in subscriptions: {
  name: 'sbfed-${uniqueString(namespaceName, topicName, sub.name)}'
  params: {
    namespaceName: namespaceName
    topicName: topicName
    subscription: sub
  }
}]
