package conformance_test

import (
	"context"
	"fmt"
	"os"

	"github.com/gorap/gorap/conformance"
)

// Checking a runtime with gorap's /v1 API: serve the conformance toolset,
// start the runtime with it (rap serve --config FILE with
// RuntimeConfigFile(kit.URL()), and --model scripted:FILE with
// RuntimeScript()), then run the suite.
func ExampleRuntimeSuite() {
	kit, err := conformance.ListenRuntimeKit("127.0.0.1:7070")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer kit.Close()
	// ... start the runtime under test here, configured with kit.URL() ...
	s := conformance.RuntimeSuite(conformance.RuntimeConfig{Kit: kit, API: "http://127.0.0.1:8080", Token: os.Getenv("RAP_TOKEN")})
	rep := s.Run(context.Background(), conformance.RunOptions{Subject: "http://127.0.0.1:8080"})
	_ = rep.WriteText(os.Stdout, false)
	if rep.Failed() {
		os.Exit(1)
	}
}
