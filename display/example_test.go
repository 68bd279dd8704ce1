package display_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gorap/gorap/display"
)

func ExampleCompile() {
	s, err := display.Compile(`"PR #" + args.number + " on " + args.owner + "/" + args.repo`, nil)
	if err != nil {
		panic(err)
	}
	var args map[string]any
	_ = json.Unmarshal([]byte(`{"owner":"acme","repo":"widgets","number":42}`), &args)
	out, err := s.Eval(context.Background(), args)
	fmt.Println(out, err)
	// Output: PR #42 on acme/widgets <nil>
}

func ExampleScript_Eval() {
	s, _ := display.Compile("let n = args.files.len(); `${n} file${if n == 1 { \"\" } else { \"s\" }} changed`", nil)
	out, _ := s.Eval(context.Background(), map[string]any{"files": []any{"a.go", "b.go"}})
	fmt.Println(out)
	_, err := s.Eval(context.Background(), map[string]any{})
	fmt.Println(err != nil)
	// Output:
	// 2 files changed
	// true
}

func ExampleRender() {
	args := json.RawMessage(`{"owner": "acme", "repo": "widgets", "number": 42}`)
	fmt.Println(display.Render(context.Background(), "get_pr", "`PR #${args.number} on ${args.owner}/${args.repo}`", args))
	// A failing script falls back to the default rendering (RAP DS-2).
	fmt.Println(display.Render(context.Background(), "get_pr", `throw "nope"`, args))
	fmt.Println(display.Render(context.Background(), "get_pr", ``, args))
	// Output:
	// PR #42 on acme/widgets
	// get_pr({"owner":"acme","repo":"widgets","number":42})
	// get_pr({"owner":"acme","repo":"widgets","number":42})
}

func ExampleDefault() {
	fmt.Println(display.Default("list_repos", nil))
	fmt.Println(display.Default("get_pr", json.RawMessage(` { "number" : 42 } `)))
	// Output:
	// list_repos({})
	// get_pr({"number":42})
}
