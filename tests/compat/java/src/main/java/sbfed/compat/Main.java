package sbfed.compat;

import java.util.Map;
import java.util.function.Function;

/**
 * One JVM run of one scenario: `java sbfed.compat.Main SCENARIO ARGS...` prints the scenario's result as one JSON
 * document on the last line of stdout (tests/compat/java_runner.py reads it). Java starts slowly, so each scenario
 * makes many checks in one run.
 */
public final class Main {
    private static final Map<String, Function<String[], Object>> SCENARIOS = Map.of(
        "harness", Harness::describe,
        "messaging", Messaging::run,
        "sessions", Sessions::run,
        "topics", Topics::run,
        "rules", Topics::rules,
        "errors", Errors::run,
        "admin", Admin::run,
        "transports", Transports::run,
        "emulator", Emulator::run);

    private Main() {
    }

    public static void main(String[] args) {
        int status = 0;
        try {
            Function<String[], Object> scenario = SCENARIOS.get(args.length > 0 ? args[0] : "");
            if (scenario == null) {
                throw new IllegalArgumentException("usage: Main " + SCENARIOS.keySet() + " ARGS...");
            }
            Object result = scenario.apply(java.util.Arrays.copyOfRange(args, 1, args.length));
            System.out.println();
            System.out.println(Json.write(result));
        } catch (Throwable error) {
            error.printStackTrace();
            System.err.println(Json.write(Harness.describe(error)));
            status = 1;
        }
        System.out.flush();
        // The SDK's reactor threads are not all daemons: leave without waiting for them.
        Runtime.getRuntime().halt(status);
    }
}
