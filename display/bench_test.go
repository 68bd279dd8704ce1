package display

import (
	"context"
	"encoding/json"
	"testing"
)

// A typical display script: a let, an if, and three concatenations.
const typicalScript = `let kind = args.draft ?? false;
let prefix = if kind { "Draft PR #" } else { "PR #" };
prefix + args.number + " on " + args.owner + "/" + args.repo`

func BenchmarkTypicalScript(b *testing.B) {
	s, err := Compile(typicalScript, nil)
	if err != nil {
		b.Fatal(err)
	}
	args, _ := decodeArgs(json.RawMessage(`{"owner":"acme","repo":"widgets","number":42}`))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := s.Eval(ctx, args)
		if err != nil || out != "PR #42 on acme/widgets" {
			b.Fatalf("%q %v", out, err)
		}
	}
}

func BenchmarkRenderCached(b *testing.B) {
	args := json.RawMessage(`{"owner":"acme","repo":"widgets","number":42}`)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if out := Render(ctx, "get_pr", typicalScript, args); out != "PR #42 on acme/widgets" {
			b.Fatal(out)
		}
	}
}

func BenchmarkCompileTypical(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Compile(typicalScript, nil); err != nil {
			b.Fatal(err)
		}
	}
}
