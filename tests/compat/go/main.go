// One binary, one scenario per run: `compat <scenario> [args]` prints one JSON document as the last line of
// its standard output (tests/compat/go_runner.py reads it); a scenario that panics exits 1 with the panic
// on standard error.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
)

var scenarios = map[string]func(args []string) doc{
	"harness":      harness,
	"messaging":    messaging,
	"sessions":     sessions,
	"topics":       topics,
	"errors":       errorsScenario,
	"admin-queues": adminQueues,
	"admin-topics": adminTopics,
	"admin-rules":  adminRules,
	"admin-paging": adminPaging,
	"emulator":     emulator,
	"tls":          overTLS,
}

func main() {
	if len(os.Args) < 2 || scenarios[os.Args[1]] == nil {
		names := make([]string, 0, len(scenarios))
		for name := range scenarios {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: compat <%s> [args]\n", strings.Join(names, "|"))
		os.Exit(2)
	}
	defer func() {
		if failure := recover(); failure != nil {
			fmt.Fprintf(os.Stderr, "%v\n%s", failure, debug.Stack())
			os.Exit(1)
		}
	}()
	result := scenarios[os.Args[1]](os.Args[2:])
	encoded, err := json.Marshal(result)
	must(err)
	fmt.Println(string(encoded))
}

// The harness itself: the pinned SDK is the one built in, and the namespace's settings reach the binary.
func harness([]string) doc {
	versions := doc{}
	if info, ok := debug.ReadBuildInfo(); ok {
		versions["go"] = info.GoVersion
		for _, module := range info.Deps {
			versions[module.Path] = module.Version
		}
	}
	return doc{
		"versions":     versions,
		"endpoint":     strings.TrimPrefix(strings.Split(connectionString(), ";")[0], "Endpoint="),
		"emulator":     strings.Contains(connectionString(), "UseDevelopmentEmulator=true"),
		"trustsBroker": trustingBroker() != nil,
	}
}
