// What the admin_*.mjs scripts share: the JS ServiceBusAdministrationClient on the namespace's management
// port, and outcomes as JSON (the value the client returned, or how it failed).
import { ServiceBusAdministrationClient } from "@azure/service-bus";
import { adminConnectionString, describeError } from "./harness.mjs";

export function adminClient(connectionString = adminConnectionString()) {
  return new ServiceBusAdministrationClient(connectionString);
}

// `{ value }` (the model the client returned, without the raw HTTP response it carries) or `{ error }` (the
// RestError's code and HTTP status, as harness.mjs describes errors).
export async function outcome(operation) {
  try {
    const value = await operation();
    return { value: JSON.parse(JSON.stringify(value ?? null, (key, v) => (key === "_response" ? undefined : v))) };
  } catch (error) {
    return { error: describeError(error) };
  }
}

// Everything an async iterator yields.
export async function all(iterator) {
  const items = [];
  for await (const item of iterator) items.push(item);
  return items;
}
