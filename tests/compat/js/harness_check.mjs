// The harness itself: the pinned SDK loads, and the namespace's settings reach the script.
import { createRequire } from "node:module";
import { parseServiceBusConnectionString } from "@azure/service-bus";
import { connectionString, run } from "./lib/harness.mjs";

const require = createRequire(import.meta.url);

await run(async () => {
  const parsed = parseServiceBusConnectionString(connectionString());
  return {
    node: process.versions.node,
    sdk: require("@azure/service-bus/package.json").version,
    endpoint: parsed.endpoint,
    keyName: parsed.sharedAccessKeyName,
    emulator: connectionString().includes("UseDevelopmentEmulator=true"),
    trustsBrokerCertificate: Boolean(process.env.NODE_EXTRA_CA_CERTS),
  };
});
