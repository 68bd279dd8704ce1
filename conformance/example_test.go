package conformance_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/gorap/gorap/conformance"
)

// A suite of one check, run against a server that answers as required.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	s := conformance.Suite{Name: "tool"}
	s.Add(conformance.Check{
		ID: "tool.close.status", Level: conformance.Must, Rule: "RAP TC-2",
		Title: "/close_thread answers 200", Fix: "answer 200 to every /close_thread, whatever its thread id",
	}, func(t *conformance.T) {
		resp, err := t.Client().Post(srv.URL+"/close_thread", "application/json", nil)
		if err != nil {
			t.Failf("no answer: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Failf("answered %d", resp.StatusCode)
		}
	})
	rep := s.Run(context.Background(), conformance.RunOptions{Subject: "a test server"})
	for _, res := range rep.Results {
		fmt.Println(res)
	}
	fmt.Println(rep.Summary())
	// Output:
	// pass MUST tool.close.status
	// 1 passed, 0 failed, 0 skipped
}
