package openai_test

import (
	"testing"

	"github.com/gorap/gorap/model/wiretest"
)

// BenchmarkComplete measures one streamed completion over loopback (a
// 4 KiB answer in 64-byte deltas plus one tool call, with a 20-message
// history): the provider's own overhead per model turn.
func BenchmarkComplete(b *testing.B) { wiretest.BenchmarkComplete(b, harness) }
