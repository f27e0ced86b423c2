// What every compatibility script shares: the namespace it talks to (from the environment js_runner.py
// sets), errors described the same way everywhere, and the one JSON document it prints for pytest.

export function connectionString() {
  return required("SB_CONNECTION_STRING");
}

export function adminConnectionString() {
  return required("SB_ADMIN_CONNECTION_STRING");
}

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (tests/compat/js_runner.py sets it)`);
  return value;
}

// The fields a test asserts on: the SDK's error class, its Service Bus code (ServiceBusError.code,
// e.g. MessagingEntityNotFound) and whether the SDK would retry.
export function describeError(error) {
  return {
    name: error?.name,
    code: error?.code,
    retryable: error?.retryable,
    statusCode: error?.statusCode,
    message: String(error?.message ?? error),
  };
}

// Runs `error`-expecting code: the description of what it threw, or null when it did not throw.
export async function thrown(operation) {
  try {
    await operation();
    return null;
  } catch (error) {
    return describeError(error);
  }
}

// Long (sequence numbers), bigint and Buffer values as JSON: numbers, strings, {base64}.
function plain(key, value) {
  if (typeof value === "bigint") return value.toString();
  if (value && typeof value === "object") {
    if (typeof value.toNumber === "function" && "low" in value && "high" in value) return value.toNumber();
    if (value.type === "Buffer" && Array.isArray(value.data)) {
      return { base64: Buffer.from(value.data).toString("base64") };
    }
  }
  return value;
}

// Runs `main(args)` and prints its result as the last line of stdout; an uncaught error is printed to
// stderr and exits 1 (js_runner.py fails the test with both).
export async function run(main) {
  try {
    const result = await main(process.argv.slice(2));
    process.stdout.write(JSON.stringify(result ?? null, plain) + "\n");
    process.exitCode = 0;
  } catch (error) {
    process.stderr.write(`${error?.stack ?? error}\n${JSON.stringify(describeError(error))}\n`);
    process.exitCode = 1;
  }
}
